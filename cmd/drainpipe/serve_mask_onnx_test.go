//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// encoderRows are the encoder's test rows of token ids.
func encoderRows(t *testing.T) [][]int64 {
	t.Helper()
	var rows struct {
		IDs [][]int64 `json:"input_ids"`
	}
	data, err := os.ReadFile(filepath.Join(encoderDir, "rows.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	return rows.IDs
}

// A sequence model's request of rows of other lengths, padded by the
// client (right or left) with an attention_mask (INT64, INT32 or BOOL),
// answers each row as a request of that row alone; padded rows without
// a mask, and masks that are not one run of tokens a row, are refused
// by name.
func TestServeSequenceAttentionMask(t *testing.T) {
	needONNX(t)
	rows := encoderRows(t)
	s := startServe(t, "--model", "encoder="+encoderDir)
	post := func(inputs ...map[string]any) (int, string, [][]float32) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"inputs": inputs, "outputs": []any{map[string]any{"name": "embedding"}}})
		resp, err := http.Post(s.http+"/v2/models/encoder/infer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var res struct {
			Outputs []struct {
				Shape []int     `json:"shape"`
				Data  []float32 `json:"data"`
			} `json:"outputs"`
		}
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, string(raw), nil
		}
		if err := json.Unmarshal(raw, &res); err != nil || len(res.Outputs) != 1 {
			t.Fatalf("%s: %v", raw, err)
		}
		var out [][]float32
		o := res.Outputs[0]
		for i := 0; i < len(o.Data); i += o.Shape[1] {
			out = append(out, o.Data[i:i+o.Shape[1]])
		}
		return resp.StatusCode, "", out
	}
	ids := func(shape []int, flat []int64) map[string]any {
		return map[string]any{"name": "input_ids", "datatype": "INT64", "shape": shape, "data": flat}
	}
	picked := [][]int64{rows[0], rows[1], rows[2], rows[6]} // 4, 67, 3 and 302 tokens
	alone := make([][]float32, len(picked))
	for i, r := range picked {
		code, msg, out := post(ids([]int{1, len(r)}, r))
		if code != http.StatusOK {
			t.Fatalf("row %d alone: %d %s", i, code, msg)
		}
		alone[i] = out[0]
	}
	width := 0
	for _, r := range picked {
		width = max(width, len(r))
	}
	// padded lays the rows out at the width, padding (id 0) on the right
	// or the left, with their mask.
	padded := func(left bool) (flat []int64, mask []int64) {
		for _, r := range picked {
			pad := make([]int64, width-len(r))
			m := make([]int64, width)
			for j := range m {
				if left && j >= len(pad) || !left && j < len(r) {
					m[j] = 1
				}
			}
			if left {
				flat = append(append(flat, pad...), r...)
			} else {
				flat = append(append(flat, r...), pad...)
			}
			mask = append(mask, m...)
		}
		return flat, mask
	}
	shape := []int{len(picked), width}
	for _, c := range []struct {
		name     string
		left     bool
		datatype string
	}{{"right INT64", false, "INT64"}, {"left INT64", true, "INT64"}, {"right INT32", false, "INT32"}, {"left BOOL", true, "BOOL"}} {
		flat, mask := padded(c.left)
		var maskData any = mask
		if c.datatype == "BOOL" {
			b := make([]bool, len(mask))
			for i, v := range mask {
				b[i] = v == 1
			}
			maskData = b
		}
		code, msg, out := post(ids(shape, flat), map[string]any{"name": "attention_mask", "datatype": c.datatype, "shape": shape, "data": maskData})
		if code != http.StatusOK || len(out) != len(picked) {
			t.Fatalf("%s: %d %s, %d rows", c.name, code, msg, len(out))
		}
		for i := range picked {
			for j, v := range alone[i] {
				if d := math.Abs(float64(out[i][j] - v)); d > 1e-5 {
					t.Fatalf("%s: row %d, element %d is %v in the batch, %v alone", c.name, i, j, out[i][j], v)
				}
			}
		}
	}
	flat, mask := padded(false)
	holed := append([]int64(nil), mask...)
	holed[1] = 0 // row 0: 1 0 1 1 0 …
	empty := append([]int64(nil), mask...)
	for j := range width {
		empty[2*width+j] = 0
	}
	maskOf := func(shape []int, m []int64) map[string]any {
		return map[string]any{"name": "attention_mask", "datatype": "INT64", "shape": shape, "data": m}
	}
	two := []int{2, width}
	bad := map[string]struct {
		inputs []map[string]any
		want   string
	}{
		"padded without a mask": {[]map[string]any{ids(shape, flat)}, "begins or ends in the pad id 0"},
		"a hole in a row":       {[]map[string]any{ids(shape, flat), maskOf(shape, holed)}, "row 0 attends slots 0…0 and 2"},
		"a row of no tokens":    {[]map[string]any{ids(shape, flat), maskOf(shape, empty)}, "row 2 attends no slot"},
		"a mask of other shape": {[]map[string]any{ids(shape, flat), maskOf(two, mask[:2*width])}, "shape [2 302]"},
		"a mask of twos":        {[]map[string]any{ids(shape, flat), maskOf(shape, append([]int64{2}, mask[1:]...))}, "is 2, want 0 or 1"},
	}
	for name, c := range bad {
		code, msg, _ := post(c.inputs...)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", name, code, msg, c.want)
		}
	}
}
