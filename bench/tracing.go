package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/drainpipe/drainpipe/bench/internal/servebench"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/serve"
	"github.com/drainpipe/drainpipe/tensor"
)

// tracingGoals: what tracing every request costs the server (spans
// made, linked and batched to an exporter that drops them, so the
// exporter's network is not counted) against what the SDK's own span
// costs, and what OpenAI's /v1/embeddings costs against the Open
// Inference Protocol on the same model and load.
func tracingGoals(c *config, mlp device.Model) []goal {
	var plain, traced *tracedPair
	start := func() (*tracedPair, *tracedPair) {
		if plain == nil {
			plain, traced = startTraced(mlp, false), startTraced(mlp, true)
		}
		return plain, traced
	}
	d := min(max(time.Duration(c.rows)*time.Microsecond, 200*time.Millisecond), 2*time.Second)
	var embed *embeddingServer
	return []goal{
		{"tracing: CPU a traced gRPC request adds (its span, and its share of a batch of 8's span and links) ÷ the SDK's bare span (serve's BenchmarkGRPCSpan)", atMost(1.5), func(int) float64 {
			return spanBenchRatio("request/batch-of-8", "sdk-floor")
		}},
		{"tracing: p50 latency added by tracing every request (µs; gRPC, 1-row requests, 1 caller)", atMost(20), func(r int) float64 {
			p, t := start()
			rp, rt := closedPair(r, p.call, t.call, 1, d)
			return float64(rt.P50-rp.P50) / float64(time.Microsecond)
		}},
		{fmt.Sprintf("server: /v1/embeddings ÷ OIP request rate, one sequence model (token ids, 1 row of 16, hidden 384, %d callers)", onlineCallers), atLeast(0.95), func(r int) float64 {
			if embed == nil {
				embed = startEmbeddingServer()
			}
			oip, openai := closedPair(r, embed.oip, embed.openai, onlineCallers, d)
			return openai.Rate() / oip.Rate()
		}},
	}
}

// spanBenchRatio runs serve's BenchmarkGRPCSpan and returns the ratio of
// two of its sub-benchmarks' ns/op: the request spans in the server are
// what tracing adds to a request, measured apart from the request, which
// costs some 50 times as much and whose noise in a closed loop hides them.
func spanBenchRatio(num, den string) float64 {
	out, err := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkGRPCSpan$", "-benchtime", "50000x", "./serve").CombinedOutput()
	if err != nil {
		check(fmt.Errorf("serve's BenchmarkGRPCSpan: %v\n%s", err, out))
	}
	nsOp := func(sub string) float64 {
		m := regexp.MustCompile(`BenchmarkGRPCSpan/` + regexp.QuoteMeta(sub) + `(-\d+)?\s+\d+\s+([\d.]+) ns/op`).FindSubmatch(out)
		if m == nil {
			check(fmt.Errorf("serve's BenchmarkGRPCSpan has no %s:\n%s", sub, out))
		}
		v, err := strconv.ParseFloat(string(m[2]), 64)
		check(err)
		return v
	}
	return nsOp(num) / nsOp(den)
}

// closedPair runs closed loops of a and b, in the round's order.
func closedPair(r int, a, b servebench.Call, callers int, d time.Duration) (ra, rb servebench.Result) {
	pair(r, func() float64 { ra = servebench.ClosedLoop(a, callers, d); return 0 },
		func() float64 { rb = servebench.ClosedLoop(b, callers, d); return 0 })
	if ra.Errors > 0 || rb.Errors > 0 {
		check(fmt.Errorf("closed loops: %d and %d requests failed", ra.Errors, rb.Errors))
	}
	return ra, rb
}

// tracedPair is a drainpipe server of the MLP, as startServers makes it,
// traced or not, with a gRPC client's one-row call.
type tracedPair struct{ call servebench.Call }

func startTraced(m device.Model, traced bool) *tracedPair {
	var opts []serve.Option
	if traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		opts = append(opts, serve.WithTracerProvider(tp))
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: tensor.Type(width)}}, nil)
	_, addr, _, err := servebench.Serve(serve.ModelSpec{Name: "mlp", Model: m, Input: schema,
		Options:  []predict.Option{predict.WithBatchSizes(1, 2, 4, 8, 16, 32, 64), predict.WithGroups(runtime.GOMAXPROCS(0))},
		Batching: online.Options{MaxDelay: 2 * time.Millisecond, QueueRows: 1 << 20}}, opts...)
	check(err)
	s := &servers{}
	return &tracedPair{call: servebench.GRPC(s.client(addr), servebench.Features(1), 1)}
}

// embeddingServer serves a sequence model whose device work is small
// (seqtest's engine, 384 wide), so what its two protocols cost shows.
type embeddingServer struct{ oip, openai servebench.Call }

func startEmbeddingServer() *embeddingServer {
	m, err := seq.New(&seqtest.Engine{Width: 384, Vocab: 30522}, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(128)}))
	check(err)
	schema := arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	url, _, _, err := servebench.Serve(serve.ModelSpec{Name: "enc", Model: m, Sequence: m, Input: schema,
		Options:  []predict.Option{predict.WithBatchSizes(1, 2, 4, 8, 16, 32, 64), predict.WithGroups(runtime.GOMAXPROCS(0))},
		Batching: online.Options{MaxDelay: 2 * time.Millisecond, QueueRows: 1 << 20}})
	check(err)
	ids := make([]int64, 16)
	for i := range ids {
		ids[i] = int64(1000 + 37*i)
	}
	oip, err := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "input_ids", "datatype": "INT64", "shape": []int{1, len(ids)}, "data": ids}},
		"outputs": []map[string]any{{"name": "embedding"}}})
	check(err)
	openai, err := json.Marshal(map[string]any{"model": "enc", "input": [][]int64{ids}})
	check(err)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * onlineCallers, MaxIdleConnsPerHost: 4 * onlineCallers}}
	base := url[:strings.Index(url, "/v2/")]
	return &embeddingServer{oip: postJSON(client, url, oip), openai: postJSON(client, base+"/v1/embeddings", openai)}
}

// postJSON is a call that posts body and reads the answer.
func postJSON(client *http.Client, url string, body []byte) servebench.Call {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var out json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %v %.200s", url, resp.StatusCode, err, out)
		}
		return nil
	}
}
