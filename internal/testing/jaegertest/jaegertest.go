// Package jaegertest runs Jaeger (v2, github.com/jaegertracing/jaeger,
// Apache-2.0) for tests, built from the Go module proxy once and kept in
// the user's cache folder: an OTLP receiver (gRPC and HTTP) on 127.0.0.1
// over memory storage, and its query API, which gives back the spans as
// OTLP.
package jaegertest

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// Version is the Jaeger release the tests run (its v2 binary).
const Version = "v1.75.0"

// pkg is Jaeger's v2 command.
const pkg = "github.com/jaegertracing/jaeger/cmd/jaeger"

// Build builds Jaeger once a machine (a few minutes: the largest of the
// test servers), for testbin.Prepare; Start builds it too.
func Build(ctx context.Context) error {
	_, err := testbin.Tool(ctx, pkg, Version)
	return err
}

// Server is a running Jaeger.
type Server struct {
	// OTLPHTTP and OTLPGRPC are the receiver's addresses, host:port.
	OTLPHTTP, OTLPGRPC string
	query              string // the query API's address
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 200000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Start builds (once) and starts Jaeger for the test, which stops it when
// it ends.
func Start(t testbin.T) *Server {
	t.Helper()
	bin, err := testbin.Tool(t.Context(), pkg, Version)
	if err != nil {
		t.Fatalf("jaegertest: %v", err)
	}
	s := &Server{OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t)}
	queryGRPC := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	s.query, _ = testbin.Start(t, bin, func(addr string) []string {
		if err := os.WriteFile(cfg, fmt.Appendf(nil, config, addr, queryGRPC, s.OTLPGRPC, s.OTLPHTTP), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"--config", cfg}
	})
	// The receiver comes up beside the query API.
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.DialTimeout("tcp", s.OTLPHTTP, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaegertest: the OTLP receiver is not listening: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr returns a free loopback address.
func freeAddr(t testbin.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Span is a span as the query API gives it back.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex
	Name                          string
	Kind                          int
	Links                         []Link
	Attributes                    map[string]any
}

// Link is a span's link to another span.
type Link struct{ TraceID, SpanID string }

// Spans returns the spans of service since a time.
func (s *Server) Spans(t testbin.T, service string, since time.Time) []Span {
	t.Helper()
	q := url.Values{"query.service_name": {service}, "query.start_time_min": {since.Add(-time.Minute).Format(time.RFC3339Nano)},
		"query.start_time_max": {time.Now().Add(time.Minute).Format(time.RFC3339Nano)}, "query.num_traces": {"100000"}}
	resp, err := http.Get("http://" + s.query + "/api/v3/traces?" + q.Encode())
	if err != nil {
		t.Fatalf("jaegertest: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		Result struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						TraceID      string `json:"traceId"`
						SpanID       string `json:"spanId"`
						ParentSpanID string `json:"parentSpanId"`
						Name         string `json:"name"`
						Kind         int    `json:"kind"`
						Links        []struct {
							TraceID string `json:"traceId"`
							SpanID  string `json:"spanId"`
						} `json:"links"`
						Attributes []struct {
							Key   string         `json:"key"`
							Value map[string]any `json:"value"`
						} `json:"attributes"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("jaegertest: the query API: %d %v", resp.StatusCode, err)
	}
	var out []Span
	for _, rs := range doc.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s := Span{TraceID: id(sp.TraceID), SpanID: id(sp.SpanID), ParentSpanID: id(sp.ParentSpanID), Name: sp.Name, Kind: sp.Kind, Attributes: map[string]any{}}
				for _, l := range sp.Links {
					s.Links = append(s.Links, Link{TraceID: id(l.TraceID), SpanID: id(l.SpanID)})
				}
				for _, a := range sp.Attributes {
					for _, v := range a.Value {
						s.Attributes[a.Key] = v
					}
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// id returns an ID in hex, as OTLP's JSON writes it, from hex or base64.
func id(s string) string {
	if _, err := hex.DecodeString(s); err == nil {
		return s
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return hex.EncodeToString(b)
	}
	return s
}
