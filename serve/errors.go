package serve

import (
	"context"
	"errors"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/online"
)

// predictError classifies a batcher's error. A row error is the
// request's fault (a token id past the vocabulary, a text too long to
// read), not the server's: 400, never 500.
func predictError(err error) error {
	var row *device.RowError
	switch {
	case errors.As(err, &row):
		return &Error{Code: CodeInvalid, Err: err}
	case errors.Is(err, online.ErrOverloaded):
		return &Error{Code: CodeOverloaded, Err: err}
	case errors.Is(err, online.ErrClosed): // also when Close's own deadline passed
		return &Error{Code: CodeUnavailable, Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeDeadline, Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCanceled, Err: err}
	}
	return &Error{Code: CodeInternal, Err: err}
}

// Code classifies a failed request; each maps to an HTTP status and a
// gRPC code.
type Code int

// The failure classes.
const (
	CodeInvalid         Code = iota // 400, INVALID_ARGUMENT: a request that can never succeed
	CodeNotFound                    // 404, NOT_FOUND: no such model or version
	CodeTooLarge                    // 413, RESOURCE_EXHAUSTED: over the request size bound
	CodeOverloaded                  // 429, RESOURCE_EXHAUSTED: the queue is full; retry later
	CodeCanceled                    // 499, CANCELLED: the client went away
	CodeInternal                    // 500, INTERNAL: the device failed
	CodeUnavailable                 // 503, UNAVAILABLE: starting or shutting down
	CodeDeadline                    // 504, DEADLINE_EXCEEDED: the deadline passed first
	CodeMethod                      // 405: the endpoint takes another method (REST only)
	CodeSlowBody                    // 408, DEADLINE_EXCEEDED: the body did not arrive in time
	CodeUnauthenticated             // 401, UNAUTHENTICATED: no API key, or not one of the server's
)

// Error is a failed request: its class and cause.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

func invalid(err error) error { return &Error{Code: CodeInvalid, Err: err} }

// codeOf returns an error's class.
func codeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
