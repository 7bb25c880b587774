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

	"github.com/drainpipe/drainpipe/internal/testing/jaegertest"
)

// serve with OTel's standard environment sends its spans to Jaeger
// (built from the Go module proxy, OTLP over HTTP): after 1,000
// concurrent one-row requests, every request span links to exactly one
// batch span, which links back to it, each batch span names exactly the
// requests it served, and the batch spans' rows and sizes add up to the
// requests and to /metrics' batch-size sum; a client's traceparent is its
// request span's parent, and a malformed one refuses nothing. predict
// sends its job's spans there too: a span a part under the run's.
func TestTracesInJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Jaeger (-short)")
	}
	j := jaegertest.Start(t)
	dir := fixture(t, 10, 16, 8, 4)
	service, began := traceTo(t, j)
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

	reqs, batches := collectSpans(t, j, service, began, "POST /v2/models/{name}/infer", requests, "batch m")
	rows := servedOnce(t, reqs, batches)
	var size int64
	for _, b := range batches {
		size += spanInt(b, "drainpipe.batch.size")
	}
	parents := 0
	for _, r := range reqs {
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
	if sum := scrape(t, s.http, `drainpipe_batch_size_rows_sum\{model="m"\}`); int64(sum) != size {
		t.Errorf("the batch spans' sizes add up to %d, /metrics' batch size sum is %v", size, sum)
	}
	t.Logf("%d request spans, %d batch spans", len(reqs), len(batches))

	// A batch job's trace: its run a span, each part a span under it.
	data := fixture(t, 5000, 16, 8, 4)
	out := filepath.Join(t.TempDir(), "out") + "/"
	if _, stderr, err := drainpipe(predictArgs(data, out, "--part-rows", "1024")...); err != nil {
		t.Fatalf("predict: %v\n%s", err, stderr)
	}
	parts, jobs := collectSpans(t, j, service, began, "part", 5, "job "+out)
	var partRows int64
	for _, p := range parts {
		partRows += spanInt(p, "drainpipe.part.rows")
		if len(jobs) != 1 || jobs[p.ParentSpanID].SpanID == "" {
			t.Fatalf("part span %s: parent %s, the job's spans %v", p.SpanID, p.ParentSpanID, jobs)
		}
	}
	if partRows != 5000 {
		t.Errorf("the part spans hold %d rows of 5,000", partRows)
	}
}

// traceTo sets OTel's environment for the commands a test starts to
// export to j, as a service of a name of its own, which it returns with
// the time it began.
func traceTo(t *testing.T, j *jaegertest.Server) (string, time.Time) {
	service := fmt.Sprintf("drainpipe-test-%d", time.Now().UnixNano())
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+j.OTLPHTTP)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", service)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	return service, time.Now()
}

// collectSpans waits for n spans named name of service in Jaeger (they
// arrive in the exporter's batches), then returns them and the batch
// spans named batchName, each by span id.
func collectSpans(t *testing.T, j *jaegertest.Server, service string, since time.Time, name string, n int, batchName string) (reqs, batches map[string]jaegertest.Span) {
	t.Helper()
	var spans []jaegertest.Span
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		spans = j.Spans(t, service, since)
		got := 0
		for _, sp := range spans {
			if sp.Name == name {
				got++
			}
		}
		if got >= n || time.Now().After(deadline) {
			break
		}
	}
	reqs, batches = map[string]jaegertest.Span{}, map[string]jaegertest.Span{}
	for _, sp := range spans {
		switch sp.Name {
		case name:
			reqs[sp.SpanID] = sp
		case batchName:
			batches[sp.SpanID] = sp
		}
	}
	if len(reqs) != n {
		t.Fatalf("%d %q spans in Jaeger, want %d", len(reqs), name, n)
	}
	return reqs, batches
}

// servedOnce checks that every request span links to exactly one batch
// span, which links back to it, and that each batch span's rows are the
// requests it links (one row each); it returns the rows of the batches
// that served requests.
func servedOnce(t *testing.T, reqs, batches map[string]jaegertest.Span) (rows int64) {
	t.Helper()
	servedBy := map[string][]string{} // request → batches linking it
	for id, b := range batches {
		for _, l := range b.Links {
			servedBy[l.SpanID] = append(servedBy[l.SpanID], id)
		}
		if len(b.Links) > 0 {
			r := spanInt(b, "drainpipe.batch.rows")
			rows += r
			if r != int64(len(b.Links)) {
				t.Errorf("batch span %s: %d rows, %d requests linked", id, r, len(b.Links))
			}
		}
	}
	for id, r := range reqs {
		if len(r.Links) != 1 || len(servedBy[id]) != 1 || servedBy[id][0] != r.Links[0].SpanID {
			t.Fatalf("request span %s links to %v, is linked from batches %v", id, r.Links, servedBy[id])
		}
	}
	return rows
}

// spanInt is an integer attribute of a span from Jaeger (OTLP's JSON
// writes int64 as a string).
func spanInt(sp jaegertest.Span, key string) int64 {
	n, _ := strconv.ParseInt(fmt.Sprint(sp.Attributes[key]), 10, 64)
	return n
}

// scrape returns the value of the /metrics sample whose name and labels
// match pattern.
func scrape(t *testing.T, base, pattern string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(pattern + ` (\S+)`).FindSubmatch(metrics)
	if m == nil {
		t.Fatalf("no %s in /metrics", pattern)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
