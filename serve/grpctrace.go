package serve

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// grpcSpans is the gRPC server's request spans: one a call, from its
// headers to its status, continuing the caller's traceparent, named and
// attributed as OTel's RPC conventions say (rpc.system.name,
// rpc.method, rpc.response.status_code).
//
// It is otelgrpc's server handler cut to what a span needs. At one-row
// requests the server spends tens of µs a call, and otelgrpc's copy of
// the incoming metadata, per-event attribute sets and duration metric
// (the server's own Prometheus histograms already measure it) were half
// of what tracing cost.
//
// Only the inference service's calls are traced: health checks and
// reflection are probes and tools, not requests; a method no service
// registers is refused before any stats handler sees it, so a client
// that makes names up makes no span names.
type grpcSpans struct {
	tracer trace.Tracer
	// names holds each registered method's span name, "" for those not
	// traced; filled before the server serves, read only after.
	names map[string]string
}

var _ stats.Handler = grpcSpans{}

// register names the methods of the server's services; call it after
// the services are registered and before the server serves.
func (h grpcSpans) register(services map[string]grpc.ServiceInfo) {
	for service, info := range services {
		for _, m := range info.Methods {
			name := ""
			if service == pb.GRPCInferenceService_ServiceDesc.ServiceName {
				name = service + "/" + m.Name
			}
			h.names["/"+service+"/"+m.Name] = name
		}
	}
}

func (h grpcSpans) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	name := h.names[info.FullMethodName]
	if name == "" {
		return ctx
	}
	ctx = tracePropagator.Extract(ctx, incomingCarrier{ctx})
	ctx, _ = h.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.RPCSystemNameGRPC, semconv.RPCMethod(name)))
	return ctx
}

func (grpcSpans) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	end, ok := rs.(*stats.End)
	if !ok {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	st, _ := status.FromError(end.Error)
	if serverFault(st.Code()) {
		span.SetStatus(otelcodes.Error, st.Message())
	}
	span.SetAttributes(grpcStatusAttr(st.Code()))
	span.End()
}

func (grpcSpans) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (grpcSpans) HandleConn(context.Context, stats.ConnStats)                       {}

// serverFault: the codes OTel's RPC conventions count as a server's
// error; the others are the caller's (a bad argument, a missing model).
func serverFault(c codes.Code) bool {
	switch c {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// grpcStatusNames are the codes as gRPC's spec spells them
// (DEADLINE_EXCEEDED), which rpc.response.status_code takes.
var grpcStatusNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

func grpcStatusAttr(c codes.Code) attribute.KeyValue {
	if int(c) < len(grpcStatusNames) {
		return semconv.RPCResponseStatusCode(grpcStatusNames[c])
	}
	return semconv.RPCResponseStatusCode(c.String())
}

// incomingCarrier reads a call's trace headers from its metadata
// without copying the rest of it; extraction only.
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := grpcmd.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {}

func (c incomingCarrier) Keys() []string {
	md, _ := grpcmd.FromIncomingContext(c.ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}
