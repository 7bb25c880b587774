// Package duckdbtest reads files with DuckDB, a reader independent of
// Arrow Go, for tests that check what the project writes: the
// @duckdb/node-api npm package (MIT), installed from the npm registry once
// into the user's cache folder and run by node.
package duckdbtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testbin"
)

// Version is the @duckdb/node-api release the tests run (DuckDB 1.5.6),
// the one the independent writers' corpus pins.
const Version = "1.5.6-r.1"

// query runs the SQL in argv[3] on an in-memory database and prints its
// rows as JSON: BIGINT as a string, FLOAT as the double it widens to
// (exactly), lists as arrays.
const query = `const [modules, sql] = process.argv.slice(2);
const { DuckDBInstance } = await import(modules + "/@duckdb/node-api/lib/index.js");
const db = await DuckDBInstance.create(":memory:");
const conn = await db.connect();
const reader = await conn.runAndReadAll(sql);
process.stdout.write(JSON.stringify(reader.getRowsJson()));
`

// Query runs sql in DuckDB and returns its rows, numbers as json.Number.
// A machine without node and npm skips the test.
func Query(t testing.TB, sql string) [][]any {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("duckdbtest: node is not on the PATH")
	}
	dir, err := testbin.NPM("duckdb-node-api-"+Version, "@duckdb/node-api@"+Version)
	if err != nil {
		t.Skipf("duckdbtest: @duckdb/node-api %s: %v", Version, err)
	}
	script := filepath.Join(t.TempDir(), "query.mjs")
	if err := os.WriteFile(script, []byte(query), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, filepath.Join(dir, "node_modules"), sql)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdbtest: %s: %v\n%s", sql, err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var rows [][]any
	if err := dec.Decode(&rows); err != nil {
		t.Fatalf("duckdbtest: %s: %v: %.200s", sql, err, out)
	}
	return rows
}
