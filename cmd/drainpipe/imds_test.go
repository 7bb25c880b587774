package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// With no AWS credentials anywhere and an instance metadata service that
// refuses IMDSv2 tokens (404, as some proxies and emulators answer), the
// CLI says in one line that it found no credentials: the AWS SDK's
// "falling back to IMDSv1" warning never reaches its stderr, and no
// IMDSv1 request is made (the CLI turns the fallback off unless
// AWS_EC2_METADATA_V1_DISABLED says otherwise).
func TestNoIMDSv1Fallback(t *testing.T) {
	var v1 int
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			v1++ // an IMDSv1 request: a GET without a token
		}
		http.NotFound(w, r)
	}))
	defer imds.Close()
	cmd := exec.Command(binary, "inspect", "s3://bucket/in.parquet?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1")
	cmd.Env = append(withoutAWS(os.Environ()), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+imds.URL,
		"AWS_CONFIG_FILE="+filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(t.TempDir(), "none"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no credentials found") {
		t.Fatalf("inspect with no credentials: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "IMDSv1") || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 || v1 > 0 {
		t.Fatalf("more than the one line, or an IMDSv1 request (%d):\n%s", v1, out)
	}
}

// withoutAWS drops the AWS variables from an environment.
func withoutAWS(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}
