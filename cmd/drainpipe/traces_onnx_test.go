//go:build onnx

package main

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/drainpipe/drainpipe/internal/jaegertest"
)

// A sequence model's traces in Jaeger: 300 concurrent /embed requests
// of texts of every length each link to exactly one batch span, which
// links back; the batch spans' tokens and token slots (the warm-up's
// marked and left out) add up to /metrics' counters, and the spans'
// rows to the requests.
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
}
