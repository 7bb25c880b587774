package s3test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// FaultProxy stands between a client and the server on loopback and
// misbehaves as a real store or network does at times: it answers
// requests 503 SlowDown, cuts response bodies half way, or fails uploads
// with 500. Set its fields under Lock.
type FaultProxy struct {
	sync.Mutex
	// RefuseGets is how many next GETs to answer 503 SlowDown.
	RefuseGets int
	// CutGets is how many next GETs to cut mid-body.
	CutGets int
	// FailWrites, if set, fails every PUT or POST whose path it matches
	// with 500 InternalError (an upload, or a part or completion of one).
	FailWrites func(path string) bool
	// DropAnswers, if set, forwards each request it matches (by method
	// and path) to the server, which carries it out, then answers the
	// client 500, as when a response is lost on the way: the SDK's retry
	// then meets what its first try did.
	DropAnswers func(method, path string) bool
	// FailDeletes, if set, answers every DELETE 500.
	FailDeletes bool
	// Stall, if set, holds every GET after the first StallAfter until the
	// client gives up (a store that stops answering), sending on Stall
	// (if it can) as each is held.
	Stall      chan struct{}
	StallAfter int
	// StallWrites stalls PUTs and POSTs (after the first StallAfter of
	// them, counted in Writes) instead of GETs.
	StallWrites bool
	Writes      int
	// Latency delays every answer, as a store far away does.
	Latency time.Duration
	// InFlight is the requests under way, MaxInFlight the most at once.
	InFlight, MaxInFlight int
	// Gets counts the GETs seen.
	Gets int

	// Endpoint is the proxy's address, http://127.0.0.1:PORT.
	Endpoint string
	upstream string
	closed   chan struct{} // at the test's end: stalled requests end
}

// Proxy starts a FaultProxy in front of s for the test.
func (s *Server) Proxy(t testbin.T) *FaultProxy {
	t.Helper()
	p := &FaultProxy{upstream: s.Endpoint, closed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: p}
	go hs.Serve(ln)
	t.Cleanup(func() {
		close(p.closed)
		hs.Close()
	})
	p.Endpoint = "http://" + ln.Addr().String()
	return p
}

// URL returns the s3:// URL of key in bucket through the proxy.
func (p *FaultProxy) URL(bucket, key string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&use_path_style=true&region=us-east-1", bucket, key, p.Endpoint)
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.Lock()
	p.InFlight++
	p.MaxInFlight = max(p.MaxInFlight, p.InFlight)
	latency := p.Latency
	p.Unlock()
	defer func() {
		p.Lock()
		p.InFlight--
		p.Unlock()
	}()
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	p.Lock()
	refuse, cut, fail := false, false, false
	switch r.Method {
	case http.MethodGet:
		p.Gets++
		refuse, cut = p.RefuseGets > 0, p.RefuseGets == 0 && p.CutGets > 0
		if refuse {
			p.RefuseGets--
		} else if cut {
			p.CutGets--
		}
	case http.MethodPut, http.MethodPost:
		fail = p.FailWrites != nil && p.FailWrites(r.URL.Path)
	case http.MethodDelete:
		fail = p.FailDeletes
	}
	drop := p.DropAnswers != nil && p.DropAnswers(r.Method, r.URL.Path)
	stall := p.Stall
	switch write := r.Method == http.MethodPut || r.Method == http.MethodPost; {
	case p.StallWrites && write:
		if p.Writes++; p.Writes <= p.StallAfter {
			stall = nil
		}
	case p.StallWrites || r.Method != http.MethodGet || p.Gets <= p.StallAfter:
		stall = nil
	}
	p.Unlock()
	if stall != nil {
		// The body read, the server notices the client going away.
		io.Copy(io.Discard, r.Body)
		select {
		case stall <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-p.closed:
		}
		return
	}
	switch {
	case refuse:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		return
	case fail:
		io.Copy(io.Discard, r.Body)
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // what the client signed
	out.ContentLength = r.ContentLength
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if drop {
		io.Copy(io.Discard, resp.Body)
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if !cut {
		io.Copy(w, resp.Body)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler) // the connection is cut mid-body
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
}

// Matches returns a FailWrites function failing the writes of keys that
// contain sub.
func Matches(sub string) func(string) bool {
	return func(path string) bool { return strings.Contains(path, sub) }
}

// FirstAnswer returns a DropAnswers function that drops the answer of
// the first request of method whose path ends in suffix, once.
func FirstAnswer(method, suffix string) func(string, string) bool {
	done := false
	return func(m, path string) bool {
		if done || m != method || !strings.HasSuffix(path, suffix) {
			return false
		}
		done = true
		return true
	}
}
