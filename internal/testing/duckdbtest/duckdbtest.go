// Package duckdbtest reads files with DuckDB (internal/duckdb), a reader
// independent of Arrow Go, for tests that check what the project writes.
package duckdbtest

import (
	"errors"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// Query runs sql in DuckDB and returns its rows, numbers as json.Number.
// A machine without node and npm skips the test (fails it under CI).
func Query(t testing.TB, sql string) [][]any {
	t.Helper()
	rows, err := duckdb.Query(sql)
	if errors.Is(err, duckdb.ErrUnavailable) {
		testbin.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
