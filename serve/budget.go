package serve

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// errBusy refuses a request that would take the server past the request
// bytes it may hold at once (WithMaxInflightBytes): 429 with
// Retry-After, RESOURCE_EXHAUSTED over gRPC.
var errBusy = &Error{Code: CodeOverloaded, Err: errors.New("the server holds all the request bytes it may at once (--max-inflight-bytes): retry shortly")}

// budget bounds the request bytes all requests hold at once, REST and
// gRPC together. A request that would pass it is refused at once, never
// queued, so that no set of concurrent clients can take the process past
// it: a REST request holds its body's bytes (the declared length before a
// byte is read, then what arrives past it, decoded) and a gRPC infer
// request its message's, until it is answered.
type budget struct {
	limit int64
	used  atomic.Int64
	// held is what each REST request being served holds, by request; its
	// handler's end gives it back (hold).
	held sync.Map // *http.Request → *int64
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

// take takes n bytes if the budget has them, without waiting: a request
// is refused, never queued.
func (b *budget) take(n int64) bool {
	for {
		used := b.used.Load()
		if n <= 0 {
			return true
		}
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *budget) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}

// hold gives back, when next has answered a request, what its body took
// of the budget. It makes no new request (the router sets the matched
// pattern on the one it is given, which tracing reads).
func (b *budget) hold(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := new(int64)
		b.held.Store(r, n)
		defer func() {
			b.held.Delete(r)
			b.give(*n)
		}()
		next.ServeHTTP(w, r)
	})
}

// charge takes n bytes for r's body, or reports that the budget has none
// left. A request hold does not see (a handler mounted elsewhere) is not
// charged: it would never give them back.
func (b *budget) charge(r *http.Request, n int64) bool {
	v, ok := b.held.Load(r)
	if !ok {
		return true
	}
	if !b.take(n) {
		return false
	}
	*v.(*int64) += n
	return true
}

// chargedReader charges the budget for the bytes read through it past
// credit (what the request took before its first byte).
type chargedReader struct {
	r      io.Reader
	b      *budget
	req    *http.Request
	credit int64
}

func (c *chargedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if over := int64(n) - c.credit; over > 0 {
		c.credit = 0
		if !c.b.charge(c.req, over) {
			return n, errBusy
		}
	} else {
		c.credit -= int64(n)
	}
	return n, err
}

// newServerBudget returns the budget the options ask for.
func newServerBudget(cfg config) (*budget, error) {
	limit := cfg.maxInflight
	if limit == 0 {
		limit = 1 << 30
		if mem := debug.SetMemoryLimit(-1); mem < math.MaxInt64 {
			limit = mem / 2
		}
		limit = max(limit, cfg.maxBody)
	}
	if limit < cfg.maxBody {
		return nil, fmt.Errorf("serve: in-flight bytes %d hold no request of the %d bytes a request may have", limit, cfg.maxBody)
	}
	return newBudget(limit), nil
}
