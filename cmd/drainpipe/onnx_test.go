//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/device/onnx"
)

const buildTags = "onnx"

func TestONNXModel(t *testing.T) {
	if onnx.DefaultLibrary() == "" {
		t.Skip("ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set " + onnx.LibraryEnv)
	}
	dir := fixture(t, 1000, 64, 4)
	model, _ := filepath.Abs(filepath.Join("..", "..", "device", "onnx", "testdata", "mlp.onnx"))
	out := filepath.Join(dir, "out.parquet")
	stdout, stderr, err := drainpipe("predict", "--model", model, "--input", filepath.Join(dir, "in-*.parquet"),
		"--output", out, "--keep", "id", "--batch-size", "64", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=1000 batches=16 padded=24") {
		t.Fatalf("summary %q", stdout)
	}
	stdout, _, err = drainpipe("inspect", out)
	if err != nil || !strings.Contains(stdout, "probabilities") || !strings.Contains(stdout, "class") {
		t.Fatalf("inspect: %v\n%s", err, stdout)
	}
}

// An ONNX model served: its metadata names the ONNX input, and a gRPC
// request gets the model's outputs.
func TestServeONNXModel(t *testing.T) {
	if onnx.DefaultLibrary() == "" {
		t.Skip("ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set " + onnx.LibraryEnv)
	}
	model, _ := filepath.Abs(filepath.Join("..", "..", "device", "onnx", "testdata", "mlp.onnx"))
	s := startServe(t, "--model", model)
	resp, err := http.Get(s.http + "/v2/models/mlp")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"platform":"onnxruntime_onnx"`) || !strings.Contains(string(body), `"shape":[-1,64]`) {
		t.Fatalf("metadata: %d %s", resp.StatusCode, body)
	}
	var meta struct {
		Inputs []struct{ Name string }
	}
	if err := json.Unmarshal(body, &meta); err != nil || len(meta.Inputs) == 0 {
		t.Fatalf("metadata %s: %v", body, err)
	}
	resp, err = http.Post(s.http+"/v2/models/mlp/infer", "application/json", bytes.NewReader(featureBodyNamed(meta.Inputs[0].Name, 3, 64)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"shape":[3]`) {
		t.Fatalf("infer: %d %s", resp.StatusCode, body)
	}
}
