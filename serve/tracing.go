package serve

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"

	"github.com/drainpipe/drainpipe/online"
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
	return otelhttp.NewHandler(h, "drainpipe", otelhttp.WithTracerProvider(s.cfg.tracing), otelhttp.WithPropagators(tracePropagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}

// grpcTracing is the gRPC server's request spans.
func (s *Server) grpcTracing() stats.Handler {
	return otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(s.cfg.tracing), otelgrpc.WithPropagators(tracePropagator))
}

// tracingObserver adds batch spans to a model's metrics observer.
type tracingObserver struct {
	online.Observer
	tracer         trace.Tracer
	model, version string
}

var _ online.BatchTracer = (*tracingObserver)(nil)

func (o *tracingObserver) StartBatch(index, size, rows int, requests []context.Context, queueWait time.Duration) func(time.Duration, error) {
	links := make([]trace.Link, 0, len(requests))
	for _, ctx := range requests {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := o.tracer.Start(context.Background(), "batch "+o.model, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("drainpipe.model", o.model), attribute.String("drainpipe.model_version", o.version),
			attribute.Int("drainpipe.batch.index", index), attribute.Int("drainpipe.batch.size", size), attribute.Int("drainpipe.batch.rows", rows),
			attribute.Int("drainpipe.batch.padding_rows", size-rows), attribute.Int("drainpipe.batch.requests", len(requests)),
			attribute.Float64("drainpipe.batch.queue_wait_seconds", queueWait.Seconds())))
	if !span.IsRecording() {
		return func(time.Duration, error) {}
	}
	back := trace.Link{SpanContext: span.SpanContext()}
	for _, ctx := range requests {
		if req := trace.SpanFromContext(ctx); req.IsRecording() {
			req.AddLink(back)
		}
	}
	return func(device time.Duration, err error) {
		span.SetAttributes(attribute.Float64("drainpipe.batch.device_seconds", device.Seconds()))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
