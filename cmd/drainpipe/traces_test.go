package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/internal/jaegertest"
)

// serve with OTel's standard environment sends its spans to Jaeger
// (built from the Go module proxy, OTLP over HTTP): after 1,000
// concurrent one-row requests, every request span links to exactly one
// batch span, which links back to it, each batch span names exactly the
// requests it served, and the batch spans' rows and sizes add up to the
// requests and to /metrics' batch-size sum; a client's traceparent is its
// request span's parent, and a malformed one refuses nothing.
func TestTracesInJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Jaeger (-short)")
	}
	j := jaegertest.Start(t)
	dir := fixture(t, 10, 16, 8, 4)
	service := fmt.Sprintf("drainpipe-test-%d", time.Now().UnixNano())
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+j.OTLPHTTP)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", service)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	began := time.Now()
	s := startServe(t, "--model", "m="+filepath.Join(dir, "model.dpmlp"), "--max-delay", "1ms")

	const requests = 1000
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var wg sync.WaitGroup
	next := make(chan int)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range 64 {
		wg.Go(func() {
			for i := range next {
				req, _ := http.NewRequest(http.MethodPost, s.http+"/v2/models/m/infer", bytes.NewReader(featureBodyNamed("features", 1, 16)))
				switch i {
				case 0:
					req.Header.Set("traceparent", parent)
				case 1:
					req.Header.Set("traceparent", "00-zz-not-a-trace-01")
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("request %d: %d", i, resp.StatusCode)
				}
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()
	client.CloseIdleConnections()

	// The spans arrive in the exporter's batches.
	var spans []jaegertest.Span
	infer := func(sp jaegertest.Span) bool { return sp.Name == "POST /v2/models/m/infer" }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		spans = j.Spans(t, service, began)
		n := 0
		for _, sp := range spans {
			if infer(sp) {
				n++
			}
		}
		if n >= requests || time.Now().After(deadline) {
			break
		}
	}
	reqs, batches := map[string]jaegertest.Span{}, map[string]jaegertest.Span{}
	for _, sp := range spans {
		switch {
		case infer(sp):
			reqs[sp.SpanID] = sp
		case sp.Name == "batch m":
			batches[sp.SpanID] = sp
		}
	}
	if len(reqs) != requests {
		t.Fatalf("%d request spans in Jaeger, want %d", len(reqs), requests)
	}
	servedBy := map[string][]string{} // request → batches linking it
	var rows, size int64
	for id, b := range batches {
		for _, l := range b.Links {
			servedBy[l.SpanID] = append(servedBy[l.SpanID], id)
		}
		n, _ := strconv.ParseInt(fmt.Sprint(b.Attributes["drainpipe.batch.size"]), 10, 64)
		size += n
		if len(b.Links) > 0 {
			r, _ := strconv.ParseInt(fmt.Sprint(b.Attributes["drainpipe.batch.rows"]), 10, 64)
			rows += r
			if r != int64(len(b.Links)) {
				t.Errorf("batch span %s: %d rows, %d requests linked", id, r, len(b.Links))
			}
		}
	}
	parents := 0
	for id, r := range reqs {
		if len(r.Links) != 1 || len(servedBy[id]) != 1 || servedBy[id][0] != r.Links[0].SpanID {
			t.Fatalf("request span %s links to %v, is linked from batches %v", id, r.Links, servedBy[id])
		}
		if r.TraceID == "4bf92f3577b34da6a3ce929d0e0e4736" && r.ParentSpanID == "00f067aa0ba902b7" {
			parents++
		}
	}
	if parents != 1 {
		t.Errorf("%d request spans continue the client's traceparent, want 1", parents)
	}
	if rows != requests {
		t.Errorf("the batch spans hold %d rows for %d one-row requests", rows, requests)
	}
	resp, err := http.Get(s.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`drainpipe_batch_size_rows_sum\{model="m"\} (\S+)`).FindSubmatch(metrics)
	if m == nil {
		t.Fatalf("no batch size sum in /metrics")
	}
	if sum, _ := strconv.ParseFloat(string(m[1]), 64); int64(sum) != size {
		t.Errorf("the batch spans' sizes add up to %d, /metrics' batch size sum is %v", size, sum)
	}
	t.Logf("%d request spans, %d batch spans", len(reqs), len(batches))
}
