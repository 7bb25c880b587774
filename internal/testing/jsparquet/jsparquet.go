// Package jsparquet reads Parquet files with two readers that share no
// code with Arrow Go or with each other, for the tests that check what
// the project writes: hyparquet (JavaScript) and parquet-wasm (arrow-rs,
// Rust compiled to WebAssembly, its tables read by Apache Arrow JS). They
// are installed from the npm registry once into the user's cache folder
// and run by node.
package jsparquet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// The releases run: those the independent writers' corpus pins.
var packages = []string{"hyparquet@1.31.5", "parquet-wasm@0.8.0", "apache-arrow@21.2.0"}

// ErrUnavailable reports a machine without node or npm, or where the
// packages could not be installed.
var ErrUnavailable = errors.New("jsparquet: unavailable")

// Digest is what a reader read of a file: its rows, and Sum of an int64
// key column and a float32 list column read in file order.
type Digest struct {
	Rows int64
	Hash uint32
}

// script reads argv's file with both readers and prints each one's
// Digest of the named key and list columns (Sum, in JavaScript).
const script = `const [modules, path, key, list] = process.argv.slice(2);
const fs = await import("node:fs");
const { createRequire } = await import("node:module");
const { parquetReadObjects } = await import(modules + "/hyparquet/src/node.js");
const pqwasm = createRequire(modules + "/")("parquet-wasm/node");
const arrow = await import(modules + "/apache-arrow/Arrow.node.mjs");
const view = new DataView(new ArrayBuffer(4));
const bits = (x) => { view.setFloat32(0, x, true); return view.getUint32(0, true); };
function digest(rows) {
  let h = 0, n = 0;
  for (const [k, vs] of rows) {
    n++;
    h = (Math.imul(h, 31) + (Number(BigInt.asUintN(32, BigInt(k))) >>> 0)) >>> 0;
    if (vs === null || vs === undefined) { h = (Math.imul(h, 31) + 0x9e3779b9) >>> 0; continue; }
    h = (Math.imul(h, 31) + vs.length) >>> 0;
    for (const v of vs) h = (Math.imul(h, 31) + bits(v)) >>> 0;
  }
  return { rows: n, hash: h };
}
const bytes = fs.readFileSync(path);
const buf = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
const objs = await parquetReadObjects({ file: buf, columns: [key, list] });
const out = { hyparquet: digest(objs.map((o) => [o[key], o[list]])) };
const table = arrow.tableFromIPC(pqwasm.readParquet(new Uint8Array(bytes)).intoIPCStream());
const keys = table.getChild(key), lists = table.getChild(list);
const rows = [];
for (let i = 0; i < table.numRows; i++) {
  const v = lists.get(i);
  rows.push([keys.get(i), v === null ? null : Array.from(v)]);
}
out["parquet-wasm"] = digest(rows);
process.stdout.write(JSON.stringify(out));
`

// Read reads the file at path with each reader and returns, by reader,
// its Digest of the int64 column key and the float32 list column list.
func Read(path, key, list string) (map[string]Digest, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("%w: node is not on the PATH", ErrUnavailable)
	}
	dir, err := testbin.NPM(context.Background(), "jsparquet-1", packages...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	tmp, err := os.MkdirTemp("", "drainpipe-jsparquet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	prog := filepath.Join(tmp, "read.mjs")
	if err := os.WriteFile(prog, []byte(script), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("node", prog, filepath.Join(dir, "node_modules"), path, key, list)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("jsparquet: %s: %v: %s", path, err, stderr.Bytes())
	}
	var got map[string]Digest
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("jsparquet: %s: %v: %.200s", path, err, out)
	}
	return got, nil
}

// Sum is the digest script computes, in Go: row by row, the key's low 32
// bits, then the list's length and each value's float32 bits (or a mark
// for a null list), folded as h = 31h + x mod 2³².
func Sum(keys []int64, lists [][]float32, null []bool) Digest {
	var h uint32
	for i, k := range keys {
		h = 31*h + uint32(k)
		if null != nil && null[i] {
			h = 31*h + 0x9e3779b9
			continue
		}
		h = 31*h + uint32(len(lists[i]))
		for _, v := range lists[i] {
			h = 31*h + math.Float32bits(v)
		}
	}
	return Digest{Rows: int64(len(keys)), Hash: h}
}

// Check reads the file at path with both readers and fails t unless each
// one's digest is want. A machine without node and npm skips the test
// (fails it under CI).
func Check(t testing.TB, path, key, list string, want Digest) {
	t.Helper()
	got, err := Read(path, key, list)
	if errors.Is(err, ErrUnavailable) {
		testbin.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, reader := range []string{"hyparquet", "parquet-wasm"} {
		if got[reader] != want {
			t.Errorf("%s reads %+v, want %+v", reader, got[reader], want)
		}
	}
}
