package fileset_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// goodFile writes rows of UniformTensors(4) to a file of the format its
// name says, in row groups (record batches) of 16 rows, and returns its bytes.
func goodFile(t testing.TB, dir, name string, rows int) []byte {
	t.Helper()
	path := filepath.Join(dir, name)
	mem := memory.NewGoAllocator()
	if strings.HasSuffix(name, ".csv") {
		var b strings.Builder
		b.WriteString("id,x,y\n")
		for i := range rows {
			fmt.Fprintf(&b, "%d,%d.5,%d\n", i, i, 2*i)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		writeFile(t, mem, path, 0, rows, 16)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readAll reads a file through fileset.Read and counts its rows. A panic
// that escapes, or a read that takes more than 20 s, fails the test.
func readAll(t testing.TB, path string, opts ...fileset.Option) (rows int64, err error) {
	t.Helper()
	type result struct {
		rows  int64
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panic = recover()
			done <- r
		}()
		ds, err := fileset.Read([]string{path}, opts...)
		if err != nil {
			r.err = err
			return
		}
		r.rows, r.err = ds.Count()
	}()
	select {
	case r := <-done:
		if r.panic != nil {
			t.Fatalf("%s: a panic escaped the reader: %v", path, r.panic)
		}
		return r.rows, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the read hangs", path)
		return 0, nil
	}
}

// Damaged files written by the project's own writers, truncated and
// bit-flipped: every read ends in an error that names the file, or yields
// every row the file declares. Files without a declaration (CSV, IPC
// streams) must not panic or yield more rows than were written.
func TestDamagedFilesFailOrYieldEveryRow(t *testing.T) {
	const rows = 100
	for _, name := range []string{"good.parquet", "good.arrow", "good.arrows", "good.csv"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			data := goodFile(t, dir, name, rows)
			declared := !strings.HasSuffix(name, ".csv") && !strings.HasSuffix(name, ".arrows")
			rng := rand.New(rand.NewPCG(uint64(len(data)), 9))
			bad := filepath.Join(dir, "bad"+filepath.Ext(name))
			var failed, whole int
			check := func(what string, damaged []byte) {
				if err := os.WriteFile(bad, damaged, 0o644); err != nil {
					t.Fatal(err)
				}
				n, err := readAll(t, bad, fileset.WithReadRows(7))
				switch {
				case err != nil:
					failed++
					if !strings.Contains(err.Error(), bad) {
						t.Fatalf("%s: the error does not name the file: %v", what, err)
					}
				case n == rows:
					whole++
				case declared || n > rows:
					t.Fatalf("%s: %d rows of %d, and no error", what, n, rows)
				}
			}
			for i := range 40 {
				cut := len(data) * i / 40
				check(fmt.Sprintf("truncated to %d bytes", cut), data[:cut])
			}
			for range 300 {
				flipped := append([]byte(nil), data...)
				pos := rng.IntN(len(data))
				flipped[pos] ^= 1 << rng.IntN(8)
				check(fmt.Sprintf("bit flipped at byte %d", pos), flipped)
			}
			t.Logf("%s: %d damaged reads failed, %d yielded every row", name, failed, whole)
		})
	}
}

// A read that asks for more memory than its ceiling fails with a clear
// error instead of exhausting the machine; so does a forged length.
func TestMemoryCeiling(t *testing.T) {
	mem := arrowtest.Allocator(t)
	dir := t.TempDir()
	for _, name := range []string{"a.parquet", "a.arrow", "a.arrows"} {
		path := filepath.Join(dir, name)
		writeFile(t, mem, path, 0, 5000, 5000)
		_, err := readAll(t, path, fileset.WithMaxMemory(4096), fileset.WithAllocator(mem))
		if !errors.Is(err, fileset.ErrUnreadable) || !strings.Contains(err.Error(), "memory ceiling of 4096 bytes") ||
			!strings.Contains(err.Error(), path) {
			t.Fatalf("%s under a 4 KiB ceiling: %v", name, err)
		}
		if n, err := readAll(t, path, fileset.WithAllocator(mem)); err != nil || n != 5000 {
			t.Fatalf("%s under the default ceiling: %d rows, %v", name, n, err)
		}
	}
	// An IPC stream whose first record batch says its body is huge.
	path := filepath.Join(dir, "forged.arrows")
	data := goodFile(t, dir, "forged.arrows", 16)
	forged := forgeBodyLength(t, data)
	if err := os.WriteFile(path, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, path, fileset.WithAllocator(mem)); err == nil {
		t.Fatal("a forged body length was read without an error")
	}
}

// forgeBodyLength rewrites the body length of the first record batch of
// an IPC stream (an int64 in its flatbuffer message) to 1 TiB.
func forgeBodyLength(t *testing.T, stream []byte) []byte {
	t.Helper()
	// The schema message comes first; the record batch message is the
	// second. Each message is: 0xFFFFFFFF, int32 metadata length, metadata,
	// body. The body length is the flatbuffer Message's int64 bodyLength,
	// found here as the little-endian value that equals the body's size.
	out := append([]byte(nil), stream...)
	off := 0
	for msg := 0; msg < 2; msg++ {
		metaLen := int(out[off+4]) | int(out[off+5])<<8 | int(out[off+6])<<16 | int(out[off+7])<<24
		meta := out[off+8 : off+8+metaLen]
		if msg == 1 {
			for i := 0; i+8 <= len(meta); i++ {
				v := uint64(0)
				for k := range 8 {
					v |= uint64(meta[i+k]) << (8 * k)
				}
				if v > 0 && v < 1<<20 && v%8 == 0 && off+8+metaLen+int(v) <= len(out) {
					big := uint64(1) << 40
					for k := range 8 {
						meta[i+k] = byte(big >> (8 * k))
					}
					return out
				}
			}
			t.Fatal("no body length found in the record batch message")
		}
		off += 8 + metaLen
	}
	return out
}
