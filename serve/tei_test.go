package serve

import (
	"runtime"
	"strings"
	"testing"
)

// TEI's inputs are counted before they are decoded: a million one-letter
// texts are refused as too many (413) having allocated next to nothing;
// 2,048 are taken.
func TestTEIInputsCountedFirst(t *testing.T) {
	body := []byte("[" + strings.Repeat(`"x",`, 1_000_000) + `"x"]`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := teiInputs(body)
	runtime.ReadMemStats(&after)
	if codeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "batch size 1000001") {
		t.Fatalf("got %v, want 413 naming the count", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("allocated %d bytes to refuse a body of %d", grew, len(body))
	}
	texts, single, err := teiInputs([]byte("[" + strings.Repeat(`"x",`, MaxEmbeddingInputs-1) + `"x"]`))
	if err != nil || single || len(texts) != MaxEmbeddingInputs {
		t.Fatalf("%d texts, single %v, %v", len(texts), single, err)
	}
	if texts, single, err := teiInputs([]byte(`"one"`)); err != nil || !single || texts[0] != "one" {
		t.Fatalf("%q, %v, %v", texts, single, err)
	}
}
