//go:build onnx

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
)

// maxLongTextRSS bounds a process that reads a 100 MB (or serves a
// 60 MB) text: the input's bytes a few times over and the encoder, where
// tokenizing the whole text held 12 GiB.
const maxLongTextRSS = 1536 << 20

// A 100 MB text row in Parquet DuckDB wrote: predict reads it only as far
// as its 512 tokens, and embeds it as it embeds its first 8 KB, within a
// bounded peak; serve answers a 60 MB text the same way and
// stays up.
func TestLongTexts(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	const phrase = "the licence grants you " // 23 bytes
	duckdbtest.Query(t, `COPY (SELECT i AS key, CASE i
		WHEN 1 THEN repeat('`+phrase+`', 4500000)
		WHEN 2 THEN substr(repeat('`+phrase+`', 400), 1, 8192)
		ELSE 'a short text ' || i::VARCHAR END AS text
		FROM range(4) t(i)) TO `+duckdb.Quote(in)+` (FORMAT parquet)`)
	out, statsFile := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "stats.json")
	cmd := exec.Command(binary, "predict", "--model", encoderDir, "--text-column", "text", "--input", in, "--output", out, "--keep", "key", "--quiet", "--stats-json", statsFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("predict over a 100 MB text: peak RSS %d MiB", rss>>20)
	if rss > maxLongTextRSS {
		t.Errorf("a 100 MB text: peak RSS %d MiB, want at most %d", rss>>20, maxLongTextRSS>>20)
	}
	got := readAll(t, out)
	if len(got.embedding) != 4 {
		t.Fatalf("%d rows out of 4", len(got.embedding))
	}
	// The two long texts, cut by the tokenizer before the model saw them.
	var st struct {
		Sequence struct {
			Truncated int64 `json:"truncated_rows"`
		} `json:"sequence"`
	}
	if data, err := os.ReadFile(statsFile); err != nil || json.Unmarshal(data, &st) != nil || st.Sequence.Truncated != 2 {
		t.Errorf("truncated_rows %d, want 2 (%v)", st.Sequence.Truncated, err)
	}
	near := func(a, b []float32) bool {
		for j := range a {
			if math.Abs(float64(a[j]-b[j])) > 1e-6 {
				return false
			}
		}
		return len(a) == len(b)
	}
	if !near(got.embedding[1], got.embedding[2]) {
		t.Errorf("the 100 MB text embeds as %v, its first 8 KB as %v", got.embedding[1][:4], got.embedding[2][:4])
	}

	s := startServe(t, "--model", "encoder="+encoderDir)
	infer := func(text string) []float32 {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "text", "datatype": "BYTES", "shape": []int{1}, "data": []string{text}}},
			"outputs": []any{map[string]any{"name": "embedding"}}})
		resp, err := http.Post(s.http+"/v2/models/encoder/infer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var res struct {
			Outputs []struct {
				Data []float32 `json:"data"`
			} `json:"outputs"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &res) != nil || len(res.Outputs) != 1 {
			t.Fatalf("infer: %d %.300s", resp.StatusCode, raw)
		}
		return res.Outputs[0].Data
	}
	long := strings.Repeat(phrase, 60<<20/len(phrase))
	if a, b := infer(long), infer(long[:8192]); !near(a, b) {
		t.Errorf("a 60 MB text serves as %v, its first 8 KB as %v", a[:4], b[:4])
	}
	// Both texts were cut by the tokenizer: the server counts them.
	resp, err := http.Get(s.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `drainpipe_sequence_truncated_rows_total{model="encoder",version="1"} 2`) {
		t.Errorf("the served truncated texts are not counted:\n%s", grepLines(string(metrics), "truncated"))
	}
	rss = statusKB(t, s.cmd.Process.Pid, "VmHWM") << 10
	t.Logf("serving a 60 MB text: peak RSS %d MiB", rss>>20)
	if rss > maxLongTextRSS {
		t.Errorf("serving a 60 MB text: peak RSS %d MiB, want at most %d", rss>>20, maxLongTextRSS>>20)
	}
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// statusKB reads a kB field of a process's /proc status.
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
