package fileset

import (
	"sync"
)

// only is the selection of its i-th row group alone.
func (s selection) only(i int) selection {
	return selection{groups: s.groups[i : i+1], starts: s.starts[i : i+1], sizes: s.sizes[i : i+1], rows: s.sizes[i]}
}

// sequential reads the selection's row groups one after another.
func (r *parquetReader) sequential(sel selection, yield func(piece, error) bool) {
	if tensors, rest := r.tensorColumns(sel); len(tensors) > 0 {
		r.tensorRecords(sel, tensors, rest, yield)
		return
	}
	r.pqarrowRecords(sel, yield)
}

// decoded is one row group's pieces, decoded ahead of the consumer.
type decoded struct {
	pieces []piece
	err    error
	done   chan struct{}
}

func (d *decoded) release() {
	for _, p := range d.pieces {
		if p.rec != nil {
			p.rec.Release()
		}
	}
	d.pieces = nil
}

// parallelRecords decodes the selection's row groups on workers
// goroutines, each group whole and on its own readers, at most workers
// groups ahead of the consumer, and yields their pieces in file order: a
// second core decodes the next group while the first is consumed. A panic
// of a worker (the memory ceiling's, or a damaged file's) is its group's
// error. When the consumer stops, the workers finish their group and
// stop; nothing they decoded is left held.
func (r *parquetReader) parallelRecords(sel selection, workers int, yield func(piece, error) bool) {
	groups := make([]*decoded, len(sel.groups))
	for i := range groups {
		groups[i] = &decoded{done: make(chan struct{})}
	}
	slots := make(chan struct{}, workers) // a group decoded or being decoded, not yet consumed
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, d := range groups {
			select {
			case slots <- struct{}{}:
			case <-stop:
				for _, rest := range groups[i:] {
					close(rest.done)
				}
				return
			}
			wg.Go(func() {
				defer close(d.done)
				d.err = guard(nil, func() error {
					var err error
					r.sequential(sel.only(i), func(p piece, perr error) bool {
						if perr != nil {
							err = perr
							return false
						}
						p.rec.Retain()
						d.pieces = append(d.pieces, p)
						return true
					})
					return err
				})
			})
		}
	})
	defer func() {
		close(stop)
		for _, d := range groups {
			<-d.done
			d.release()
		}
		wg.Wait()
	}()
	for _, d := range groups {
		<-d.done
		for j, p := range d.pieces {
			if !yield(p, nil) {
				return
			}
			p.rec.Release()
			d.pieces[j].rec = nil
		}
		d.pieces = nil
		if d.err != nil {
			yield(piece{}, d.err)
			return
		}
		<-slots
	}
}
