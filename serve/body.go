package serve

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// readBody reads a request's body, gzip-decoded if it says so, within the
// size bound (a declared Content-Length over it is refused before a byte
// is read, a gzip body's decoded size is bounded too) and the body
// deadline, and charges the server's budget for what it holds (the
// declared length before a byte is read); a drain cuts a body still
// arriving.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.maxBody
	tooLarge := &Error{Code: CodeTooLarge, Err: fmt.Errorf("request body over %d bytes", limit)}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	enc := strings.ToLower(r.Header.Get("Content-Encoding"))
	credit := int64(0)
	if r.ContentLength > 0 && enc != "gzip" {
		if !s.budget.charge(r, r.ContentLength) {
			return nil, errBusy
		}
		credit = r.ContentLength
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.bodyTimeout))
	stop := s.bodies.add(rc)
	defer stop()
	src := &sourceReader{r: http.MaxBytesReader(w, r.Body, limit)}
	var in io.Reader = src
	gzipped := false
	switch enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(in)
		if err != nil && !errors.Is(err, src.err) {
			return nil, invalid(fmt.Errorf("the gzip body cannot be decoded: %w", err))
		}
		if err != nil {
			return nil, s.bodyError(err, tooLarge)
		}
		in, gzipped = io.LimitReader(gz, limit+1), true
	default:
		return nil, invalid(fmt.Errorf("Content-Encoding %q: the server reads gzip or none", enc))
	}
	body, err := readAll(&chargedReader{r: in, b: s.budget, req: r, credit: credit}, credit)
	if errors.Is(err, errBusy) {
		return nil, errBusy
	}
	if err != nil {
		if gzipped && !errors.Is(err, src.err) {
			// The bytes arrived; the compressed stream in them is damaged
			// or cut short: the request is bad, not the client gone.
			return nil, invalid(fmt.Errorf("the gzip body cannot be decoded: %w", err))
		}
		return nil, s.bodyError(err, tooLarge)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	rc.SetReadDeadline(time.Time{})
	return body, nil
}

// readAll reads r to its end into one buffer of size bytes, when the
// size is known, or of the size it comes to: io.ReadAll's doubling
// allocates up to three times the body.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// sourceReader is the body as it arrives, with the error its read
// ended with (io.EOF aside): what a decoder reading from it returns
// besides is the decoder's own.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// bodyError classifies a failed body read.
func (s *Server) bodyError(err, tooLarge error) error {
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded) && s.draining.Load():
		return &Error{Code: CodeUnavailable, Err: errors.New("the server is draining: the request body did not arrive in time")}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &Error{Code: CodeSlowBody, Err: fmt.Errorf("request body not received within %s", s.cfg.bodyTimeout)}
	}
	return &Error{Code: CodeCanceled, Err: fmt.Errorf("reading the request: %w", err)}
}

// bodyReads are the request bodies being read, which a drain cuts: a
// client that stalls mid-body must not hold the shutdown for its whole
// timeout. A body still arriving when the drain begins gets a short grace
// (a healthy client's finishes), then its read ends.
type bodyReads struct {
	mu       sync.Mutex
	reads    map[*http.ResponseController]struct{}
	deadline time.Time // once cut, the reads' deadline
}

// add registers a body read until the function it returns is called.
func (b *bodyReads) add(rc *http.ResponseController) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.deadline.IsZero() {
		rc.SetReadDeadline(b.deadline)
		return func() {}
	}
	if b.reads == nil {
		b.reads = map[*http.ResponseController]struct{}{}
	}
	b.reads[rc] = struct{}{}
	return func() {
		b.mu.Lock()
		delete(b.reads, rc)
		b.mu.Unlock()
	}
}

// cutAll ends the body reads under way, and every one after, within grace.
func (b *bodyReads) cutAll(grace time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadline = time.Now().Add(grace)
	for rc := range b.reads {
		rc.SetReadDeadline(b.deadline)
	}
}
