// Package duckdb runs DuckDB, a reader that shares no code with Arrow Go,
// for the tests that check what the project writes and the benchmarks that
// measure its reader against a peer: the @duckdb/node-api npm package
// (MIT), installed from the npm registry once into the user's cache folder
// and run by node.
package duckdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// Version is the @duckdb/node-api release run (DuckDB 1.5.6), the one the
// independent writers' corpus pins.
const Version = "1.5.6-r.1"

// ErrUnavailable reports a machine without node or npm, or where the
// package could not be installed.
var ErrUnavailable = errors.New("duckdb: unavailable")

// script runs argv's SETUP once, then its SQL ROUNDS times on THREADS
// threads, and prints the best time of SQL in seconds and the last run's
// rows as JSON (BIGINT as a string, FLOAT as the double it widens to,
// exactly; lists as arrays).
const script = `const [modules, setup, sql, threads, rounds] = process.argv.slice(2);
const { DuckDBInstance } = await import(modules + "/@duckdb/node-api/lib/index.js");
const db = await DuckDBInstance.create(":memory:", { threads: threads });
const conn = await db.connect();
if (setup !== "") await conn.run(setup);
let best = Infinity, rows = [];
for (let r = 0; r < Number(rounds); r++) {
  const began = process.hrtime.bigint();
  const reader = await conn.runAndReadAll(sql);
  best = Math.min(best, Number(process.hrtime.bigint() - began) / 1e9);
  rows = reader.getRowsJson();
}
process.stdout.write(JSON.stringify({ seconds: best, rows }));
`

// Query runs sql on an in-memory database and returns its rows, numbers
// as json.Number.
func Query(sql string) ([][]any, error) {
	rows, _, err := run("", sql, 1, 1)
	return rows, err
}

// Time runs sql rounds times on the given threads and returns the best
// time in seconds (DuckDB's, without node's start) and the rows.
func Time(sql string, threads, rounds int) (float64, [][]any, error) {
	rows, secs, err := run("", sql, threads, rounds)
	return secs, rows, err
}

// TimeAfter is Time, with setup run once before, untimed (a table made
// in memory, for a write's time alone).
func TimeAfter(setup, sql string, threads, rounds int) (float64, [][]any, error) {
	rows, secs, err := run(setup, sql, threads, rounds)
	return secs, rows, err
}

func run(setup, sql string, threads, rounds int) ([][]any, float64, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, 0, fmt.Errorf("%w: node is not on the PATH", ErrUnavailable)
	}
	dir, err := testbin.NPM(context.Background(), "duckdb-node-api-"+Version, "@duckdb/node-api@"+Version)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: @duckdb/node-api %s: %v", ErrUnavailable, Version, err)
	}
	tmp, err := os.MkdirTemp("", "drainpipe-duckdb-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "run.mjs")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return nil, 0, err
	}
	cmd := exec.Command("node", path, filepath.Join(dir, "node_modules"), setup, sql, strconv.Itoa(threads), strconv.Itoa(rounds))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("duckdb: %s: %v: %s", sql, err, stderr.Bytes())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var res struct {
		Seconds json.Number
		Rows    [][]any
	}
	if err := dec.Decode(&res); err != nil {
		return nil, 0, fmt.Errorf("duckdb: %s: %v: %.200s", sql, err, out)
	}
	secs, err := res.Seconds.Float64()
	return res.Rows, secs, err
}

// Quote returns path as an SQL string literal.
func Quote(path string) string {
	return "'" + string(bytes.ReplaceAll([]byte(path), []byte("'"), []byte("''"))) + "'"
}
