package serve

import (
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
// deadline; a drain cuts a body still arriving.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.maxBody
	tooLarge := &Error{Code: CodeTooLarge, Err: fmt.Errorf("request body over %d bytes", limit)}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.bodyTimeout))
	stop := s.bodies.add(rc)
	defer stop()
	var in io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(in)
		if err != nil {
			return nil, s.bodyError(err, tooLarge)
		}
		in = io.LimitReader(gz, limit+1)
	default:
		return nil, invalid(fmt.Errorf("Content-Encoding %q: the server reads gzip or none", enc))
	}
	body, err := io.ReadAll(in)
	if err != nil {
		return nil, s.bodyError(err, tooLarge)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	rc.SetReadDeadline(time.Time{})
	return body, nil
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
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum):
		return invalid(fmt.Errorf("reading the request body: %w", err))
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
