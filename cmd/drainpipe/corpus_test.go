package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// predict --set-aside over the independent writers' Parquet files: every
// row is predicted or set aside, the irregular ones (null, empty, ragged,
// a null value, NaN) set aside and nothing else.
func TestPredictWritersCorpus(t *testing.T) {
	dir := filepath.Join("..", "..", "dataset", "fileset", "testdata", "writers", "files")
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []struct {
		Name      string            `json:"name"`
		Rows      int               `json:"rows"`
		K         int               `json:"k"`
		Irregular map[string]string `json:"irregular"`
	}
	if err := json.Unmarshal(data, &files); err != nil {
		t.Fatal(err)
	}
	models := map[int]string{} // a model for each width, made once
	ran := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name, ".parquet") {
			continue
		}
		ran++
		if models[f.K] == "" {
			models[f.K] = filepath.Join(fixture(t, 2, f.K, 3), "model.dpmlp")
		}
		t.Run(f.Name, func(t *testing.T) {
			out := t.TempDir()
			stdout, stderr, err := drainpipe("predict", "--model", models[f.K], "--input", filepath.Join(dir, f.Name),
				"--output", filepath.Join(out, "out.parquet"), "--feature-column", "v", "--keep", "id",
				"--set-aside", filepath.Join(out, "aside.parquet"), "--quiet")
			bad := len(f.Irregular)
			want := fmt.Sprintf("rows=%d ", f.Rows-bad)
			aside := bad == 0 || strings.Contains(stdout, fmt.Sprintf("set_aside=%d", bad))
			if err != nil || !strings.Contains(stdout, want) || !aside {
				t.Fatalf("want %sset_aside=%d: %v\n%s%s", want, bad, err, stdout, stderr)
			}
		})
	}
	if ran < 10 {
		t.Fatalf("%d Parquet files in the corpus", ran)
	}
}
