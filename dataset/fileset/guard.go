package fileset

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	// ErrUnreadable reports a file its reader could not decode: the reader
	// panicked (the panic was recovered), or asked for more memory than the
	// ceiling allows, as a forged length field does.
	ErrUnreadable = errors.New("file cannot be read")
	// ErrRowCount reports a file that yielded a different number of rows
	// than its metadata declares (a Parquet footer): rows were lost.
	ErrRowCount = errors.New("rows read differ from the rows the file declares")
	// ErrMemoryCeiling reports a read that asked for more memory than its
	// ceiling (WithMaxMemory) allows; it comes wrapped with ErrUnreadable.
	ErrMemoryCeiling = errors.New("over the read's memory ceiling")
)

// defaultMemoryCeiling is the base of a file read's memory ceiling; the
// ceiling adds 16 times the file's size (see WithMaxMemory).
const defaultMemoryCeiling = 2 << 30

// ceiling is an allocator that refuses to hold more than limit bytes at
// once. Arrow's allocators cannot return an error, so an allocation over
// the limit panics with errOverCeiling, which the reader's guard turns
// into an error before the Go runtime would die out of memory.
type ceiling struct {
	mem   memory.Allocator
	limit int64
	held  atomic.Int64
}

type errOverCeiling struct{ asked, held, limit int64 }

func (e errOverCeiling) Error() string {
	return fmt.Sprintf("an allocation of %d bytes (with %d held) would pass the read's memory ceiling of %d bytes", e.asked, e.held, e.limit)
}

func (c *ceiling) take(n int64) {
	if held := c.held.Add(n); held > c.limit {
		c.held.Add(-n)
		panic(errOverCeiling{n, held - n, c.limit})
	}
}

// tryTake takes n bytes if they fit under the limit, and reports whether
// it did: for memory a reader can do without (the fetches ahead).
func (c *ceiling) tryTake(n int64) bool {
	if held := c.held.Add(n); held > c.limit {
		c.held.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken.
func (c *ceiling) give(n int64) { c.held.Add(-n) }

func (c *ceiling) Allocate(size int) []byte {
	c.take(int64(size))
	return c.mem.Allocate(size)
}

func (c *ceiling) Reallocate(size int, b []byte) []byte {
	c.take(int64(size - len(b)))
	return c.mem.Reallocate(size, b)
}

func (c *ceiling) Free(b []byte) {
	c.held.Add(-int64(len(b)))
	c.mem.Free(b)
}

// guard runs a file reader's step, turning a panic of the reader into an
// error wrapping ErrUnreadable. Panics of the consumer's loop body (inside
// yield, marked by inYield) are not the reader's and go on up.
func guard(inYield *bool, step func() error) (err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if inYield != nil && *inYield {
			panic(p)
		}
		if e, ok := p.(errOverCeiling); ok {
			err = fmt.Errorf("%w: %w: %v", ErrUnreadable, ErrMemoryCeiling, e)
			return
		}
		err = fmt.Errorf("%w: the reader panicked: %v", ErrUnreadable, p)
	}()
	return step()
}
