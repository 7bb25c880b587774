package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// params are what a route's wildcards stand for in a request.
var params = strings.NewReplacer("{name}", "mlp", "{version}", "1", "{model}", "mlp", "{$}", "")

// Every REST route and every gRPC method, listed from the router and the
// services the gRPC server registers (so a route added later is in the
// list), asks for the key, but the probes: no key and a wrong key are 401
// (UNAUTHENTICATED) in the protocol's own error shape, the right key is
// anything else. The keys come from a file, rotated while serving: the
// old key is refused and the new one taken, without a restart. Each
// refusal is counted in /metrics, which asks for the key too.
func TestEveryDoorAsksForTheKey(t *testing.T) {
	tr := newTestRepository(t)
	tr.put(t, "mlp", "1", "11")
	keyFile := filepath.Join(t.TempDir(), "keys")
	writeFile(t, keyFile, "first-key\n")
	r := serveTest(t, nil, WithRepository(tr.repository(t, 0)), WithAPIKeyFile(keyFile))

	refused := map[string]int{}
	check := func(key string) {
		t.Helper()
		var header []string
		if key != "" {
			header = []string{"Authorization", "Bearer " + key}
		}
		want := key == "" || key == "wrong"
		for _, pattern := range append(r.srv.routes().patterns, "GET /no/such/route") {
			method, path, _ := strings.Cut(pattern, " ")
			if path == "" {
				method, path = "GET", method // a pattern without a method
			}
			path = params.Replace(path)
			code, body := r.do(t, method, path, "{}", nil, header...)
			probe := probes[path]
			if got := code == http.StatusUnauthorized; got != (want && !probe) {
				t.Errorf("key %q: %s %s: %d %s", key, method, path, code, body)
				continue
			}
			if code != http.StatusUnauthorized {
				continue
			}
			refused[doorOf(path)]++
			var shape map[string]any
			if err := json.Unmarshal(body, &shape); err != nil {
				t.Errorf("%s %s: %v in %s", method, path, err, body)
			}
			switch doorOf(path) {
			case "openai":
				if e, _ := shape["error"].(map[string]any); e == nil || e["code"] != "invalid_api_key" {
					t.Errorf("%s: not OpenAI's error: %s", path, body)
				}
			case "tei":
				if shape["error_type"] != "Unauthorized" {
					t.Errorf("%s: not TEI's error: %s", path, body)
				}
			default:
				if _, ok := shape["error"].(string); !ok {
					t.Errorf("%s: not the protocol's error: %s", path, body)
				}
			}
			if strings.Contains(string(body), key) && key != "" {
				t.Errorf("%s: the answer repeats the key sent: %s", path, body)
			}
		}
		for _, method := range grpcMethods(t, r.srv) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			if key != "" {
				ctx = grpcmd.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
			}
			err := callGRPC(ctx, r.conn, method)
			cancel()
			probe := strings.HasPrefix(method, "/grpc.health.v1.Health/")
			if got := status.Code(err) == codes.Unauthenticated; got != (want && !probe) {
				t.Errorf("key %q: %s: %v", key, method, err)
			}
			if status.Code(err) == codes.Unauthenticated {
				refused["grpc"]++
			}
		}
	}
	check("")
	check("wrong")
	check("first-key")

	writeFile(t, keyFile, "the-second-key\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := r.do(t, "GET", "/v2", nil, nil, "Authorization", "Bearer the-second-key")
		if code == http.StatusOK {
			break
		}
		refused["rest"]++
		if time.Now().After(deadline) {
			t.Fatalf("the rotated key is still refused: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := r.do(t, "GET", "/v2", nil, nil, "Authorization", "Bearer first-key"); code != http.StatusUnauthorized {
		t.Fatalf("the rotated-out key: %d, want 401", code)
	}
	refused["rest"]++
	check("the-second-key")

	_, metrics := r.do(t, "GET", "/metrics", nil, nil, "Authorization", "Bearer the-second-key")
	for protocol, n := range refused {
		line := regexp.MustCompile(`(?m)^drainpipe_auth_failures_total\{protocol="` + protocol + `"\} (\d+)$`).FindSubmatch(metrics)
		if line == nil || string(line[1]) != itoa(n) {
			t.Errorf("metrics count %q refusals for %s, want %d", line, protocol, n)
		}
	}
	if strings.Contains(string(metrics), "first-key") {
		t.Error("the metrics hold a key")
	}
}

// A server with public metrics serves /metrics without the key, and
// nothing else.
func TestMetricsPublic(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithAPIKeys("k"), WithMetricsPublic(true))
	if code, _ := r.do(t, "GET", "/metrics", nil, nil); code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
	if code, _ := r.do(t, "GET", "/v2/models/mlp", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("model metadata: %d", code)
	}
}

// A key file must hold a key when the server is made.
func TestKeyFileWithoutKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeFile(t, path, "\n  \n")
	if _, err := New([]ModelSpec{mlpSpec(t, testMLP(t))}, WithAPIKeyFile(path)); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("got %v", err)
	}
	os.Remove(path)
	if _, err := New([]ModelSpec{mlpSpec(t, testMLP(t))}, WithAPIKeyFile(path)); err == nil {
		t.Error("a missing key file is taken")
	}
}

// grpcMethods lists the full names of the methods the server's gRPC
// services register.
func grpcMethods(t *testing.T, s *Server) []string {
	srv := s.grpcServer()
	defer srv.Stop()
	var out []string
	for service, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, "/"+service+"/"+m.Name)
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d gRPC methods: %v", len(out), out)
	}
	return out
}

// callGRPC calls method with an empty message and returns the first
// error the call answers (nil when it answers a message).
func callGRPC(ctx context.Context, conn *grpc.ClientConn, method string) error {
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		return stream.RecvMsg(&emptypb.Empty{})
	}
	stream.CloseSend()
	return stream.RecvMsg(&emptypb.Empty{})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
