// Command pqread measures Parquet decoding: the rows per second of a bare
// pqarrow read of a file (every column, every row group) and of the same
// file read through fileset.Read, plus the time to write it. The file holds
// an int64 id and 64 float32 features as a Parquet list column, the shape of
// the batch jobs' inputs.
//
//	go run ./bench/pqread                       # writes a 1M-row file in a temp folder
//	go run ./bench/pqread --file in.parquet     # reads (or first writes) that file
//
// Builds of this program against two Arrow versions, run on the same --file,
// compare their decoders in one run. The dataset reader runs with one
// decoder and with two (row groups side by side, the default on 2 cores),
// each summing every feature value; DuckDB, the peer, does the same at 1
// and 2 threads when node and npm are there (internal/duckdb installs
// @duckdb/node-api once), and its sum checks the reader's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/bench/internal/readsum"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
)

const width = 64

func main() {
	path := flag.String("file", "", "Parquet file to read; written first if missing (default: a temporary file)")
	rows := flag.Int("rows", 1_000_000, "rows of the file written")
	groupRows := flag.Int("group-rows", 65536, "rows per row group of the file written")
	readRows := flag.Int("read-rows", 4096, "rows per record read")
	rounds := flag.Int("rounds", 3, "interleaved rounds; the fastest of each reader is kept")
	flag.Parse()

	if *path == "" {
		dir, err := os.MkdirTemp("", "drainpipe-pqread-")
		check(err)
		defer os.RemoveAll(dir)
		*path = filepath.Join(dir, "in.parquet")
	}
	if _, err := os.Stat(*path); err != nil {
		start := time.Now()
		check(write(*path, *rows, *groupRows))
		fmt.Printf("%-9s %-8s %10d rows %8.3f s\n", arrowVersion(), "write", *rows, time.Since(start).Seconds())
	}
	readers := []struct {
		name string
		read func(string, int) (int64, float64, error)
	}{{"pqarrow", readBare}, {"dataset-1", readDataset(1)}, {"dataset-2", readDataset(2)}}
	best := make([]time.Duration, len(readers))
	var n int64
	var sum float64 // the feature values', as the dataset reader sums them
	for range *rounds {
		for i, r := range readers {
			start := time.Now()
			got, s, err := r.read(*path, *readRows)
			if r.name != "pqarrow" {
				sum = s
			}
			check(err)
			d := time.Since(start)
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
			n = got
		}
	}
	for i, r := range readers {
		fmt.Printf("%-9s %-10s %10d rows %8.3f s %12.0f rows/s\n", arrowVersion(), r.name, n, best[i].Seconds(), float64(n)/best[i].Seconds())
	}
	for _, threads := range []int{1, 2} {
		secs, duckSum, err := duckDB(*path, threads, *rounds)
		if err != nil {
			fmt.Printf("duckdb: %v\n", err)
			break
		}
		// An independent reader's sum of the same values: a decoding
		// error shows here (the sums differ only in the order of
		// additions).
		if math.Abs(sum-duckSum) > 1e-9*math.Max(math.Abs(duckSum), 1) {
			log.Fatalf("the dataset reader's sum of the features %v, DuckDB's %v", sum, duckSum)
		}
		decoders := map[int]int{1: 1, 2: 2}[threads]
		fmt.Printf("%-9s %-10s %10d rows %8.3f s %12.0f rows/s   dataset-%d ÷ duckdb %.3f\n", "duckdb", fmt.Sprintf("threads=%d", threads), n, secs,
			float64(n)/secs, decoders, secs/best[decoders].Seconds())
	}
}

// duckDB times DuckDB's read of the file (the best of rounds, in seconds)
// summing every feature value, and returns the sum.
func duckDB(path string, threads, rounds int) (float64, float64, error) {
	secs, rows, err := duckdb.Time(readsum.SQL(duckdb.Quote(path)), threads, rounds)
	if err != nil {
		return 0, 0, err
	}
	sum, err := rows[0][0].(json.Number).Float64()
	return secs, sum, err
}

// arrowVersion names the Arrow module this binary was built with.
func arrowVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if strings.Contains(m.Path, "apache/arrow") {
				return m.Version
			}
		}
	}
	return "arrow"
}

func write(path string, rows, groupRows int) error {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithMaxRowGroupLength(int64(groupRows)))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	lb := b.Field(1).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Float32Builder)
	vals := make([]float32, width)
	const chunk = 4096
	for start := 0; start < rows; start += chunk {
		for i := start; i < min(start+chunk, rows); i++ {
			ids.Append(int64(i))
			lb.Append(true)
			for j := range vals {
				vals[j] = rng.Float32()
			}
			vb.AppendValues(vals, nil)
		}
		rec := b.NewRecordBatch()
		err := w.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// readBare reads every column of every row group with pqarrow's record
// reader: the floor for any Parquet source.
func readBare(path string, readRows int) (int64, float64, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return 0, 0, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(readRows)}, memory.NewGoAllocator())
	if err != nil {
		return 0, 0, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return 0, 0, err
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n, 0, nil
}

// readDataset reads the file through fileset with decoders row groups
// side by side, summing every feature value as DuckDB's query does.
func readDataset(decoders int) func(string, int) (int64, float64, error) {
	return func(path string, readRows int) (int64, float64, error) {
		return readsum.Dataset(path, readRows, decoders)
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
