//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

const buildTags = "onnx"

func TestONNXModel(t *testing.T) {
	if onnx.DefaultLibrary() == "" {
		testbin.Missing(t, "%s", "ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set "+onnx.LibraryEnv)
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
		testbin.Missing(t, "%s", "ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set "+onnx.LibraryEnv)
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

// An ONNX model by URL, which ONNX Runtime opens by path: read from S3,
// kept under its digest in the user's cache folder, it predicts what the
// same model on disk does.
func TestONNXModelFromS3(t *testing.T) {
	if onnx.DefaultLibrary() == "" {
		testbin.Missing(t, "%s", "ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set "+onnx.LibraryEnv)
	}
	dir := fixture(t, 1000, 64, 4)
	model, _ := filepath.Abs(filepath.Join("..", "..", "device", "onnx", "testdata", "mlp.onnx"))
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "models")
	if err := os.WriteFile(filepath.Join(bucket, "mlp.onnx"), arrowtest.ReadFile(t, model), 0o644); err != nil {
		t.Fatal(err)
	}
	local, remote := filepath.Join(dir, "local.parquet"), filepath.Join(dir, "remote.parquet")
	for out, m := range map[string]string{local: model, remote: srv.URL("models", "mlp.onnx")} {
		if _, stderr, err := drainpipe("predict", "--model", m, "--input", filepath.Join(dir, "in-*.parquet"),
			"--output", out, "--keep", "id", "--batch-size", "64", "--quiet"); err != nil {
			t.Fatalf("--model %s: %v\n%s", m, err, stderr)
		}
	}
	if !bytes.Equal(arrowtest.ReadFile(t, local), arrowtest.ReadFile(t, remote)) {
		t.Fatal("the predictions of the ONNX model on S3 differ from the model on disk's")
	}
}
