package job_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/job"
)

// traced is a tracer provider whose spans a test reads.
func traced(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, spans
}

// partSpans returns the spans named name of a run's job span, as
// attribute maps, and checks they are its children.
func partSpans(t *testing.T, spans *tracetest.InMemoryExporter, name string) []map[attribute.Key]attribute.Value {
	t.Helper()
	var jobs []tracetest.SpanStub
	var parts []map[attribute.Key]attribute.Value
	got := spans.GetSpans()
	for _, s := range got {
		if s.Parent.IsValid() {
			continue
		}
		jobs = append(jobs, s)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d root spans, want the run's one", len(jobs))
	}
	for _, s := range got {
		if s.Name != name {
			continue
		}
		if s.Parent.SpanID() != jobs[0].SpanContext.SpanID() {
			t.Fatalf("a %s span is not the job's child", name)
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes {
			attrs[a.Key] = a.Value
		}
		parts = append(parts, attrs)
	}
	spans.Reset()
	return parts
}

// A job's trace has a span a part under the run's; a resumed run's
// trace has the parts an earlier run committed too, marked resumed, and
// the parts of the two runs are each part once, with every row.
func TestPartSpansMarkResumedParts(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 2000)
	tp, spans := traced(t)
	out := filepath.Join(t.TempDir(), "out.parquet")
	cfg := config(mem, input, out, m)
	cfg.TracerProvider = tp
	interrupt(t, cfg, 700)
	first := partSpans(t, spans, "part")
	if len(first) == 0 {
		t.Fatal("no part spans in the interrupted run")
	}
	cfg.Resume = true
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	second := partSpans(t, spans, "part")
	var rows int64
	seen := map[int64]bool{}
	resumed := 0
	for _, p := range second {
		i := p["drainpipe.part.index"].AsInt64()
		if seen[i] {
			t.Fatalf("part %d twice in the resumed run's trace", i)
		}
		seen[i] = true
		rows += p["drainpipe.part.rows"].AsInt64()
		if p["drainpipe.part.resumed"].AsBool() {
			resumed++
			if i >= int64(len(first)) {
				t.Errorf("part %d marked resumed, the first run committed %d", i, len(first))
			}
		} else if i < int64(len(first)) {
			t.Errorf("part %d, committed by the first run, is not marked resumed", i)
		}
	}
	for i := range int64(len(seen)) {
		if !seen[i] {
			t.Fatalf("no part %d in the resumed run's trace of %d parts", i, len(seen))
		}
	}
	if resumed != len(first) || rows != 2000 {
		t.Fatalf("the resumed run's trace: %d parts (%d resumed, %d before), %d rows; want 2000 rows", len(seen), resumed, len(first), rows)
	}
}

// RunUnits' trace has a span a unit: those a process before it
// committed (here shard 0 of 2, before a rerun on one process) marked
// resumed, with their rows.
func TestUnitSpansMarkCommittedUnits(t *testing.T) {
	mem := arrowtest.Allocator(t)
	_, m := setup(t, mem, 10)
	in := grouped(t, mem, t.TempDir(), 64, 2500, 700)
	tp, spans := traced(t)
	cfg := config(mem, in, t.TempDir()+"/", m)
	cfg.PartRows, cfg.TracerProvider = 256, tp
	cfg.Shard = fileset.Shard{Index: 0, Count: 2}
	if _, err := job.RunUnits(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	mine := partSpans(t, spans, "unit")
	cfg.Shard = fileset.Shard{Index: 0, Count: 1}
	if _, err := job.RunUnits(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	all := partSpans(t, spans, "unit")
	var rows int64
	resumed, names := 0, map[string]bool{}
	for _, u := range all {
		names[u["drainpipe.unit.name"].AsString()] = true
		rows += u["drainpipe.part.rows"].AsInt64()
		if u["drainpipe.part.resumed"].AsBool() {
			resumed++
		}
		if u["drainpipe.unit.taken"].AsBool() {
			t.Errorf("unit %s taken, with no other process", u["drainpipe.unit.name"].AsString())
		}
	}
	if len(mine) == 0 || resumed != len(mine) || len(names) != len(all) || rows != 3200 {
		t.Fatalf("the rerun's trace: %d units, %d resumed (the first shard wrote %d), %d rows; want 3,200 rows", len(all), resumed, len(mine), rows)
	}
}
