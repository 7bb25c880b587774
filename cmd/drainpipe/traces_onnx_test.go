//go:build onnx

package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/jaegertest"
)

// A sequence model's traces in Jaeger: 300 concurrent /embed requests
// of texts of every length each link to exactly one batch span, which
// links back; the batch spans' tokens and token slots (the warm-up's
// marked and left out) add up to /metrics' counters, and the spans'
// rows to the requests. Then 1,000 requests to made-up paths name no
// span after their paths, and each /v1/embeddings span carries the
// GenAI attributes of the usage its answer reports.
func TestSequenceTracesInJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Jaeger (-short)")
	}
	needONNX(t)
	j := jaegertest.Start(t)
	service, began := traceTo(t, j)
	s := startServe(t, "--model", "emb="+filepath.Join(folders, "roberta-st"), "--max-delay", "2ms")
	var doc struct{ Texts []string }
	readJSON(t, filepath.Join(folders, "roberta-st", "texts.json"), &doc)

	const requests = 300
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				text := doc.Texts[i%len(doc.Texts)]
				if st := teiPost(t, s.http+"/tei/emb/embed", map[string]any{"inputs": text, "truncate": true}, nil); st != 200 {
					t.Errorf("request %d: status %d", i, st)
				}
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()

	reqs, batches := collectSpans(t, j, service, began, "POST /tei/{model}/embed", requests, "batch emb")
	if rows := servedOnce(t, reqs, batches); rows != requests {
		t.Errorf("the batch spans hold %d rows for %d one-text requests", rows, requests)
	}
	var tokens, slots int64
	for _, b := range batches {
		if fmt.Sprint(b.Attributes["drainpipe.batch.warm_up"]) == "true" {
			continue
		}
		n, sl := spanInt(b, "drainpipe.batch.tokens"), spanInt(b, "drainpipe.batch.token_slots")
		if n == 0 || n > sl {
			t.Errorf("batch span %s: %d tokens in %d slots", b.SpanID, n, sl)
		}
		tokens, slots = tokens+n, slots+sl
	}
	if got := scrape(t, s.http, `drainpipe_sequence_tokens_total\{model="emb",version="1"\}`); int64(got) != tokens {
		t.Errorf("/metrics counts %v tokens, the batch spans %d", got, tokens)
	}
	if got := scrape(t, s.http, `drainpipe_sequence_token_slots_total\{model="emb",version="1"\}`); int64(got) != slots {
		t.Errorf("/metrics counts %v token slots, the batch spans %d", got, slots)
	}
	t.Logf("%d request spans, %d batch spans: %d tokens in %d slots", len(reqs), len(batches), tokens, slots)

	for i := range 1000 {
		method := []string{"GET", "POST", "DELETE", "PATCH"}[i%4]
		req, _ := http.NewRequest(method, fmt.Sprintf("%s/scan-%d/%x", s.http, i, i*7919), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	const embeddings = 5
	usage := map[int64]int{} // prompt tokens → answers that report them
	dims := 0
	for i := range embeddings {
		var answer struct {
			Data  []struct{ Embedding []float32 }
			Usage struct {
				PromptTokens int64 `json:"prompt_tokens"`
			}
		}
		if st := teiPost(t, s.http+"/v1/embeddings", map[string]any{"model": "emb", "input": doc.Texts[:i+1], "encoding_format": "float"}, &answer); st != 200 {
			t.Fatalf("/v1/embeddings: %d", st)
		}
		usage[answer.Usage.PromptTokens]++
		dims = len(answer.Data[0].Embedding)
	}
	spans, _ := collectSpans(t, j, service, began, "POST /v1/embeddings", embeddings, "")
	for _, sp := range spans {
		want := map[string]string{"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "emb", "gen_ai.embeddings.dimension.count": strconv.Itoa(dims)}
		for k, v := range want {
			if got := fmt.Sprint(sp.Attributes[k]); got != v {
				t.Errorf("embeddings span %s: %s = %q, want %q", sp.SpanID, k, got, v)
			}
		}
		usage[spanInt(sp, "gen_ai.usage.input_tokens")]--
	}
	for n, left := range usage {
		if left != 0 {
			t.Errorf("usage %d tokens: %d more answers than spans report it", n, left)
		}
	}
	names := map[string]bool{}
	for _, sp := range j.Spans(t, service, began) {
		names[sp.Name] = true
		if strings.Contains(sp.Name, "scan-") {
			t.Fatalf("a span named after a made-up path: %q", sp.Name)
		}
	}
	t.Logf("span names after 1,000 made-up paths: %d", len(names))
}
