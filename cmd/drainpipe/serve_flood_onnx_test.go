//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/internal/testing/hostile"
)

// 64 hostile clients at once, each sending one of the hostile bodies to
// one of the text model's doors, keep the serve process's peak RSS
// within its in-flight budget a few times over (each body held, and what
// decoding it costs): every one answered, none with a 5xx, and every
// well-formed request beside them answered, once there is room (429 and
// Retry-After until then).
func TestServeHostileFlood(t *testing.T) {
	needONNX(t)
	const size, budget, clients = 16 << 20, 64 << 20, 64
	s := startServe(t, "--model", "enc="+encoderDir, "--max-inflight-bytes", "64MiB", "--max-delay", "1ms")
	embed := func() int {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"model": "enc", "input": []string{"a short text", "and another one"}})
		resp, err := http.Post(s.http+"/v1/embeddings", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := embed(); code != http.StatusOK {
		t.Fatalf("a well-formed request: %d", code)
	}
	before := peakRSS(t, s.cmd.Process.Pid)

	type request struct {
		name, path string
		body       []byte
	}
	var bodies []request
	for pn, payload := range hostile.Payloads(size) {
		for dn, door := range hostile.Doors("enc", size) {
			bodies = append(bodies, request{dn + ", " + pn, door.Path, door.Body(payload)})
		}
	}
	// The largest first, all at once.
	slices.SortFunc(bodies, func(a, b request) int { return len(b.body) - len(a.body) })

	var wg sync.WaitGroup
	var answered, busy atomic.Int64
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			switch code := embed(); code {
			case http.StatusOK:
				answered.Add(1)
			case http.StatusTooManyRequests:
				busy.Add(1)
				time.Sleep(50 * time.Millisecond)
			default:
				t.Errorf("a well-formed request beside the flood: %d", code)
			}
		}
	})
	var flood sync.WaitGroup
	var cut atomic.Int64
	for i := range clients {
		b := bodies[i%len(bodies)]
		flood.Go(func() {
			resp, err := http.Post(s.http+b.path, "application/json", bytes.NewReader(b.body))
			if err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
				// Refused from its headers (over the budget): the server
				// answered and closed while the client still wrote the
				// body it would not read, which Go's client may report
				// as the write's error instead of the answer.
				cut.Add(1)
				return
			}
			if err != nil {
				t.Errorf("%s: %v", b.name, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("%s: %d", b.name, resp.StatusCode)
			}
		})
	}
	flood.Wait()
	close(stop)
	wg.Wait()
	if code := embed(); code != http.StatusOK {
		t.Errorf("a well-formed request after the flood: %d", code)
	}
	grew := peakRSS(t, s.cmd.Process.Pid) - before
	t.Logf("%d hostile clients (%d cut off mid-body once refused): peak RSS grew %d MiB (budget %d MiB); beside them %d well-formed requests answered, %d told to retry", clients, cut.Load(), grew>>20, budget>>20, answered.Load(), busy.Load())
	if grew > 4*budget {
		t.Errorf("peak RSS grew %d MiB, past 4 × the %d MiB budget", grew>>20, budget>>20)
	}
	if answered.Load() == 0 {
		t.Error("no well-formed request was answered during the flood")
	}
}
