package sink_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// Every format keeps a tensor slice's own values: records cut from a
// larger one at an offset, as the job's outputs get them.
func TestSlicesKeepTheirValues(t *testing.T) {
	for _, name := range []string{"out.parquet", "out.arrow", "out.arrows"} {
		t.Run(name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			whole := predictions(t, mem, 3000)
			defer whole.Release()
			path := filepath.Join(t.TempDir(), name)
			w, err := sink.Create(path, whole.Schema(), sink.WithAllocator(mem), sink.WithRowGroupRows(1000))
			if err != nil {
				t.Fatal(err)
			}
			for _, cut := range [][2]int64{{1000, 1500}, {7, 1000}, {2999, 3000}, {1500, 2999}} {
				s := whole.NewSlice(cut[0], cut[1])
				err := w.Write(s)
				s.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := tensor.Float32(whole.Column(1), 3)
			rows := 0
			for r, err := range ds.Records() {
				if err != nil {
					t.Fatal(err)
				}
				got, err := tensor.Float32(r.Column(1), 3)
				if err != nil {
					t.Fatal(err)
				}
				for i, id := range arrowtest.Int64s(t, "id", r) {
					src := int(id - 100)
					for j := range 3 {
						if math.Float32bits(got[3*i+j]) != math.Float32bits(want[3*src+j]) {
							t.Fatalf("id %d value %d: %v, want %v", id, j, got[3*i+j], want[3*src+j])
						}
					}
					rows++
				}
			}
			if rows != 500+993+1+1499 {
				t.Fatalf("%d rows read back", rows)
			}
		})
	}
}
