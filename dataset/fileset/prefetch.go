package fileset

import (
	"context"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/storage"
)

// coalesceGap is the largest hole between two column chunks that a
// prefetch reads through to make one request of them.
const coalesceGap = 1 << 20

// prefetcher reads a Parquet object's column chunks ahead of the decoders
// (Arrow C++'s pre-buffering is the model): when a read falls in a row
// group, that group's chunks and the next group's are fetched, adjacent
// chunks in one request, while the group is decoded. A read it holds no
// fetched byteRange for goes to the object directly, so what it serves is the
// object's bytes either way.
type prefetcher struct {
	storage.File
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	order  []int               // the row groups to be read, in order
	spans  map[int][]byteRange // by row group: the coalesced chunk ranges
	loaded map[int][]*fetch    // by row group
}

type byteRange struct{ off, n int64 }

type fetch struct {
	byteRange
	done chan struct{}
	data []byte
	err  error
}

func newPrefetcher(f storage.File) *prefetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &prefetcher{File: f, ctx: ctx, cancel: cancel, loaded: map[int][]*fetch{}}
}

// plan sets the row groups to be read, in order, and the leaf columns
// read (nil: all).
func (p *prefetcher) plan(pf *file.Reader, groups, leaves []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order, p.spans = slices.Clone(groups), map[int][]byteRange{}
	md := pf.MetaData()
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
		if f.err == nil {
			return copy(b, f.data[off-f.off:]), nil
		}
	}
	return p.File.ReadAt(b, off)
}

// cached returns the fetch holding [off, off+n), starting the fetches of
// its row group and the next one, and dropping those of the groups before.
func (p *prefetcher) cached(off, n int64) *fetch {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, g := range p.order {
		for _, s := range p.spans[g] {
			if off < s.off || off+n > s.off+s.n {
				continue
			}
			p.load(g)
			if i+1 < len(p.order) {
				p.load(p.order[i+1])
			}
			for _, before := range p.order[:i] {
				delete(p.loaded, before)
			}
			for _, f := range p.loaded[g] {
				if f.off == s.off {
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
		f := &fetch{byteRange: s, done: make(chan struct{})}
		p.loaded[g] = append(p.loaded[g], f)
		p.wg.Go(func() {
			defer close(f.done)
			if p.ctx.Err() != nil {
				f.err = p.ctx.Err()
				return
			}
			f.data = make([]byte, s.n)
			_, f.err = p.File.ReadAt(f.data, s.off)
		})
	}
	if p.loaded[g] == nil {
		p.loaded[g] = []*fetch{}
	}
}

// Close stops the fetches under way, waits for them, and closes the object.
func (p *prefetcher) Close() error {
	p.cancel()
	p.wg.Wait()
	return p.File.Close()
}
