package serve

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/seq"
)

// Traces: each request a span (REST, gRPC, OpenAI's and TEI's endpoints
// alike), continuing the caller's W3C traceparent; each batch a span of
// its own, linked to every request span it served, each of which links
// back to it. A batch serves many requests, and a request's rows may
// span batches: links, not parents, say which served which.

// tracePropagator reads and writes W3C trace context; a malformed
// traceparent starts a new trace and refuses nothing.
var tracePropagator = propagation.TraceContext{}

// tracer is the server's tracer, from its TracerProvider.
func (s *Server) tracer() trace.Tracer {
	return s.cfg.tracing.Tracer("github.com/drainpipe/drainpipe/serve")
}

// traced wraps the REST handler in request spans, if the server traces.
func (s *Server) traced(h http.Handler) http.Handler {
	if s.cfg.tracing == nil {
		return h
	}
	// otelhttp names a span "METHOD route" from the pattern the router
	// matched ("POST /v2/models/{name}/infer"), never from the path a
	// client sent, and a method it does not know "HTTP".
	return otelhttp.NewHandler(h, "drainpipe", otelhttp.WithTracerProvider(s.cfg.tracing), otelhttp.WithPropagators(tracePropagator))
}

// grpcTracing is the gRPC server's request spans.
func (s *Server) grpcTracing() grpcSpans {
	return grpcSpans{tracer: s.tracer(), names: map[string]string{}}
}

// tracingObserver adds batch spans to a model's metrics observer.
type tracingObserver struct {
	online.Observer
	tracer         trace.Tracer
	model, version string
	sequence       bool // a seq.Model's windows report their tokens
}

var _ online.BatchTracer = (*tracingObserver)(nil)

func (o *tracingObserver) StartBatch(ctx context.Context, index, size, rows int, requests []context.Context, queueWait time.Duration) (context.Context, func(time.Duration, error)) {
	links := make([]trace.Link, 0, len(requests))
	warmUp := false
	for _, rc := range requests {
		if sc := trace.SpanContextFromContext(rc); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
		warmUp = warmUp || rc.Value(warmUpKey{}) != nil
	}
	ctx, span := o.tracer.Start(ctx, "batch "+o.model, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("drainpipe.model", o.model), attribute.String("drainpipe.model_version", o.version),
			attribute.Int("drainpipe.batch.index", index), attribute.Int("drainpipe.batch.size", size), attribute.Int("drainpipe.batch.rows", rows),
			attribute.Int("drainpipe.batch.padding_rows", size-rows), attribute.Int("drainpipe.batch.requests", len(requests)),
			attribute.Float64("drainpipe.batch.queue_wait_seconds", queueWait.Seconds())))
	if warmUp {
		span.SetAttributes(attribute.Bool("drainpipe.batch.warm_up", true))
	}
	if !span.IsRecording() {
		return ctx, func(time.Duration, error) {}
	}
	back := trace.Link{SpanContext: span.SpanContext()}
	for _, rc := range requests {
		if req := trace.SpanFromContext(rc); req.IsRecording() {
			req.AddLink(back)
		}
	}
	var tokens *windowTokens
	if o.sequence {
		tokens = &windowTokens{}
		ctx = seq.ObserveWindows(ctx, tokens.add)
	}
	return ctx, func(device time.Duration, err error) {
		span.SetAttributes(attribute.Float64("drainpipe.batch.device_seconds", device.Seconds()))
		if tokens != nil {
			span.SetAttributes(tokens.attributes()...)
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// windowTokens sums the windows a batch ran as (one, or one a replica,
// reported at once): its sub-batches' shapes, real tokens and slots.
type windowTokens struct {
	mu sync.Mutex
	st seq.Stats
}

func (w *windowTokens) add(st seq.Stats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.Add(st)
}

// attributes are the batch span's token attributes: its shapes as
// rows×tokens (each sub-batch once, in order of size), tokens, slots and
// the padding waste between them.
func (w *windowTokens) attributes() []attribute.KeyValue {
	w.mu.Lock()
	defer w.mu.Unlock()
	shapes := slices.SortedFunc(maps.Keys(w.st.Shapes), func(a, b seq.Shape) int {
		return cmp.Or(cmp.Compare(a.Slots(), b.Slots()), cmp.Compare(a.Tokens, b.Tokens))
	})
	var labels []string
	for _, sh := range shapes {
		for range w.st.Shapes[sh] {
			labels = append(labels, sh.String())
		}
	}
	return []attribute.KeyValue{
		attribute.StringSlice("drainpipe.batch.shapes", labels),
		attribute.Int64("drainpipe.batch.sub_batches", w.st.SubBatches),
		attribute.Int64("drainpipe.batch.tokens", w.st.Tokens),
		attribute.Int64("drainpipe.batch.token_slots", w.st.Slots),
		attribute.Int64("drainpipe.batch.truncated_rows", w.st.Truncated),
		attribute.Float64("drainpipe.batch.padding_waste", w.st.PaddingWaste()),
	}
}
