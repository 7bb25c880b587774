package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/bench/internal/servebench"
	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
	_ "github.com/drainpipe/drainpipe/storage/s3driver" // s3://
)

// The object-storage goals read from an S3 server on loopback
// (VersityGW, built once from the module proxy as the tests build it):
// what a read fetches and asks of the store, how objects far away are
// planned, and the client's CPU a byte against a local read's.
const (
	objectGroupRows = 8192
	manyObjects     = 100
	objectLatency   = 20 * time.Millisecond
)

// objectStore is the server and the files of the object-storage goals.
type objectStore struct {
	owner           *owner
	srv             *s3test.Server
	proxy           *s3test.FaultProxy // objectLatency away
	local           string             // big.parquet on local disk
	bigRows, groups int
}

// objectGoals are the object-storage goals; the server starts on the
// first round that needs it.
func objectGoals(c *config) (gs []goal, done func()) {
	var st *objectStore
	start := func() *objectStore {
		if st == nil {
			st = startObjectStore(c)
		}
		return st
	}
	done = func() {
		if st != nil {
			st.owner.close()
		}
	}
	readRows := []int{1000, objectGroupRows, 2 * objectGroupRows, 8 * objectGroupRows}
	gs = []goal{
		{fmt.Sprintf("object storage: bytes fetched ÷ the object's size, the most over --read-rows %v (row groups of %d)", readRows, objectGroupRows), atMost(1.01), func(int) float64 {
			st := start()
			worst := 0.0
			for _, n := range readRows {
				tr := st.read(st.srv.URL("bench", "big.parquet"), n, st.bigRows)
				worst = max(worst, float64(tr.Bytes)/float64(tr.Size))
			}
			return worst
		}},
		{"object storage: requests an object, one row group; beyond one a further row group, many (the more of the two)", atMost(3), func(int) float64 {
			st := start()
			one := st.read(st.srv.URL("bench", "one.parquet"), 1<<14, 1000)
			big := st.read(st.srv.URL("bench", "big.parquet"), 1<<14, st.bigRows)
			return float64(max(one.Requests, big.Requests-int64(st.groups-1)))
		}},
		{fmt.Sprintf("object storage: %d objects %v away, planned and read (s)", manyObjects, objectLatency), atMost(3), func(int) float64 {
			st := start()
			began := time.Now()
			ds, err := fileset.Read([]string{st.proxy.URL("bench", "many/in-*.parquet")}, fileset.WithAllocator(c.mem))
			check(err)
			if n, err := ds.Count(); err != nil || n != manyObjects*50 {
				check(fmt.Errorf("%d objects: %d rows read, %v", manyObjects, n, err))
			}
			return time.Since(began).Seconds()
		}},
		{"object storage: the reader's CPU a byte from S3 ÷ from local disk (best of 5 a round)", atMost(1.15), func(r int) float64 {
			st := start()
			cpu := func(path string) func() float64 {
				return func() float64 {
					began, err := servebench.CPUTime()
					check(err)
					st.read(path, 1<<14, st.bigRows)
					ended, err := servebench.CPUTime()
					check(err)
					return (ended - began).Seconds()
				}
			}
			// A read takes tens of milliseconds of CPU: each side's best
			// of five.
			local, s3 := bestPair(r, 5, cpu(st.local), cpu(st.srv.URL("bench", "big.parquet")))
			return s3 / local
		}},
	}
	return gs, done
}

// startObjectStore starts the server and writes the goals' files: big
// (rows of an id and 64 features, in row groups of objectGroupRows), one
// (a single row group) and many (manyObjects small objects), with a
// local copy of big.
func startObjectStore(c *config) *objectStore {
	o := &owner{}
	srv := s3test.Start(o)
	bucket := srv.Bucket(o, "bench")
	st := &objectStore{owner: o, srv: srv, bigRows: min(c.rows, 200_000)}
	st.groups = (st.bigRows + objectGroupRows - 1) / objectGroupRows
	write := func(path string, rows, width, group int, seed uint64) {
		check(os.MkdirAll(filepath.Dir(path), 0o755))
		w, err := sink.Create(path, dataset.TensorSchema(width), sink.WithRowGroupRows(int64(group)), sink.WithAllocator(c.mem))
		check(err)
		_, err = dataset.Copy(w, dataset.UniformTensors(c.mem, rows, width, min(rows, 1<<14), seed).Records())
		check(err)
		check(w.Commit())
	}
	write(filepath.Join(bucket, "big.parquet"), st.bigRows, width, objectGroupRows, 1)
	write(filepath.Join(bucket, "one.parquet"), 1000, width, 1000, 2)
	for i := range manyObjects {
		write(filepath.Join(bucket, "many", fmt.Sprintf("in-%03d.parquet", i)), 50, 4, 50, uint64(i))
	}
	st.local = filepath.Join(c.dir, "big.parquet")
	write(st.local, st.bigRows, width, objectGroupRows, 1)
	st.proxy = srv.Proxy(o)
	st.proxy.Lock()
	st.proxy.Latency = objectLatency
	st.proxy.Unlock()
	return st
}

// read reads every row of path, readRows at a time, through an Opener of
// its own, checks it holds rows, and returns the object's traffic (zero
// for a local file).
func (st *objectStore) read(path string, readRows, rows int) storage.Traffic {
	o := storage.NewOpener()
	defer o.Close()
	ds, err := fileset.Read([]string{path}, fileset.WithReadRows(readRows), fileset.WithOpener(o), fileset.WithAllocator(memory.NewGoAllocator()))
	check(err)
	n := 0
	for rec, err := range ds.Records() {
		check(err)
		n += int(rec.NumRows())
	}
	if n != rows {
		check(fmt.Errorf("%s: %d rows read, want %d", path, n, rows))
	}
	for _, tr := range o.Traffic() {
		return tr
	}
	return storage.Traffic{}
}

// owner stands in for a test as the owner of the S3 server and proxy
// (internal/testbin.T): it fails the program on an error, and close
// stops what it started.
type owner struct{ cleanups []func() }

func (*owner) Helper()                           {}
func (*owner) Fatal(args ...any)                 { log.Fatal(args...) }
func (*owner) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
func (*owner) Context() context.Context          { return context.Background() }
func (o *owner) Cleanup(f func())                { o.cleanups = append(o.cleanups, f) }

func (o *owner) TempDir() string {
	dir, err := os.MkdirTemp("", "drainpipe-bench-store-")
	check(err)
	o.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (o *owner) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	check(os.Setenv(key, value))
	o.Cleanup(func() {
		if had {
			os.Setenv(key, old)
		} else {
			os.Unsetenv(key)
		}
	})
}

// close runs the cleanups, the last registered first.
func (o *owner) close() {
	for i := len(o.cleanups) - 1; i >= 0; i-- {
		o.cleanups[i]()
	}
}
