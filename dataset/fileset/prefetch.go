package fileset

import (
	"context"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/storage"
)

// groupsAhead is how many row groups past the one being decoded are
// fetched at once: two requests in flight fetch 1.7 times the bytes a
// second of one on loopback S3.
const groupsAhead = 2

// coalesceGap is the largest hole between two column chunks that a
// prefetch reads through to make one request of them.
const coalesceGap = 1 << 20

// prefetcher reads a Parquet object's column chunks ahead of the decoders
// (Arrow C++'s pre-buffering is the model): when a read falls in a row
// group, that group's chunks and the next groupsAhead groups' are
// fetched, adjacent chunks in one request, while the group is decoded. A read it holds no
// fetched byteRange for goes to the object directly, so what it serves is the
// object's bytes either way.
type prefetcher struct {
	storage.File
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	order []int // the row groups to be read, in order
	// lag is how many groups before the one a read falls in are kept: a
	// read of many rows takes its columns one after another, each across
	// the groups the read spans, so the first column is in a later group
	// while the next still needs the earlier ones.
	lag    int
	spans  map[int][]byteRange // by row group: the coalesced chunk ranges
	loaded map[int][]*fetch    // by row group
	// free holds the buffers of groups read: reused, they need neither
	// allocating nor clearing (which cost a tenth of an object's read).
	free [][]byte
	// limit, if set, is the read's memory ceiling, which the buffers
	// count against (taken bytes, given back at Close): a group that does
	// not fit is not fetched ahead, and its reads go to the object.
	limit *ceiling
	taken int64
}

type byteRange struct{ off, n int64 }

type fetch struct {
	byteRange
	done chan struct{}
	data []byte
	err  error
	// users counts the reads copying from data (under the prefetcher's
	// lock); a dropped fetch's buffer is freed when the last is done.
	users   int
	dropped bool
}

func newPrefetcher(ctx context.Context, f storage.File, limit *ceiling) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	return &prefetcher{File: f, ctx: ctx, cancel: cancel, loaded: map[int][]*fetch{}, limit: limit}
}

// plan sets the row groups to be read, in order, the leaf columns read
// (nil: all), and the rows a read takes.
func (p *prefetcher) plan(pf *file.Reader, groups, leaves []int, readRows int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order, p.spans = slices.Clone(groups), map[int][]byteRange{}
	md := pf.MetaData()
	fewest := int64(readRows)
	for _, g := range groups {
		fewest = max(1, min(fewest, md.RowGroup(g).NumRows()))
	}
	// A read of readRows rows, starting anywhere in a group, spans this
	// many groups besides its first.
	p.lag = int((int64(readRows)+fewest-1)/fewest) + 1
	if leaves == nil {
		for i := range md.Schema.NumColumns() {
			leaves = append(leaves, i)
		}
	}
	for _, g := range groups {
		rg := md.RowGroup(g)
		var chunks []byteRange
		for _, leaf := range leaves {
			col, err := rg.ColumnChunk(leaf)
			if err != nil {
				continue // the decoder reports it
			}
			start := col.DataPageOffset()
			if col.HasDictionaryPage() && col.DictionaryPageOffset() > 0 && start > col.DictionaryPageOffset() {
				start = col.DictionaryPageOffset()
			}
			if n := col.TotalCompressedSize(); start >= 0 && n > 0 && start+n <= p.Size() {
				chunks = append(chunks, byteRange{start, n})
			}
		}
		p.spans[g] = coalesce(chunks)
	}
}

// coalesce merges chunks closer than coalesceGap, in file order.
func coalesce(chunks []byteRange) []byteRange {
	slices.SortFunc(chunks, func(a, b byteRange) int { return int(a.off - b.off) })
	var out []byteRange
	for _, c := range chunks {
		if last := len(out) - 1; last >= 0 && c.off <= out[last].off+out[last].n+coalesceGap {
			out[last].n = max(out[last].n, c.off+c.n-out[last].off)
			continue
		}
		out = append(out, c)
	}
	return out
}

func (p *prefetcher) ReadAt(b []byte, off int64) (int, error) {
	if f := p.cached(off, int64(len(b))); f != nil {
		<-f.done
		n, err := 0, f.err
		if err == nil {
			n = copy(b, f.data[off-f.off:])
		}
		p.mu.Lock()
		if f.users--; f.users == 0 && f.dropped {
			p.free = append(p.free, f.data)
		}
		p.mu.Unlock()
		if err == nil {
			return n, nil
		}
	}
	return p.File.ReadAt(b, off)
}

// cached returns the fetch holding [off, off+n), starting the fetches of
// its row group and the next groupsAhead, and dropping those of the groups
// more than lag before it.
func (p *prefetcher) cached(off, n int64) *fetch {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, g := range p.order {
		for _, s := range p.spans[g] {
			if off < s.off || off+n > s.off+s.n {
				continue
			}
			for _, next := range p.order[i:min(i+1+groupsAhead, len(p.order))] {
				p.load(next)
			}
			for _, before := range p.order[:max(0, i-p.lag)] {
				p.drop(before)
			}
			for _, f := range p.loaded[g] {
				if f.off == s.off {
					f.users++
					return f
				}
			}
		}
	}
	return nil
}

// load starts fetching row group g's spans, once. p.mu is held.
func (p *prefetcher) load(g int) {
	if _, ok := p.loaded[g]; ok {
		return
	}
	for _, s := range p.spans[g] {
		data := p.buffer(s.n)
		if data == nil {
			break // over the ceiling: read from the object as asked
		}
		f := &fetch{byteRange: s, done: make(chan struct{}), data: data}
		p.loaded[g] = append(p.loaded[g], f)
		p.wg.Go(func() {
			defer close(f.done)
			if p.ctx.Err() != nil {
				f.err = p.ctx.Err()
				return
			}
			if r, ok := p.File.(storage.ContextReaderAt); ok {
				// Under the prefetcher's context: Close ends it at once.
				_, f.err = r.ReadAtContext(p.ctx, f.data, s.off)
			} else {
				_, f.err = p.File.ReadAt(f.data, s.off)
			}
		})
	}
	if p.loaded[g] == nil {
		p.loaded[g] = []*fetch{}
	}
}

// buffer returns a slice of n bytes, a freed one if one is large enough;
// nil if a new one would pass the memory ceiling. p.mu is held.
func (p *prefetcher) buffer(n int64) []byte {
	for i, b := range p.free {
		if int64(cap(b)) >= n {
			p.free = slices.Delete(p.free, i, i+1)
			return b[:n]
		}
	}
	if p.limit != nil {
		if !p.limit.tryTake(n) {
			return nil
		}
		p.taken += n
	}
	return make([]byte, n)
}

// drop forgets row group g's fetches, keeping the buffers of those done,
// once no read copies from them, for the groups to come. p.mu is held.
func (p *prefetcher) drop(g int) {
	for _, f := range p.loaded[g] {
		f.dropped = true
		select {
		case <-f.done:
			if f.users == 0 {
				p.free = append(p.free, f.data)
			}
		default: // still under way: its buffer goes with it
		}
	}
	delete(p.loaded, g)
}

// Close stops the fetches under way, waits for them, and closes the object.
func (p *prefetcher) Close() error {
	p.cancel()
	p.wg.Wait()
	if p.limit != nil {
		p.limit.give(p.taken)
		p.taken = 0
	}
	return p.File.Close()
}
