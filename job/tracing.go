package job

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Traces: a run is a span ("job"), under the caller's span if ctx holds
// one; each part it commits (each unit, in RunUnits) a span under it,
// from its first row written to its commit. On a resume, every part or
// unit committed before is a span too, of no length, marked
// drainpipe.part.resumed: a trace shows the whole output and what this
// run did of it.

// tracer is the job's tracer; a no-op one without a TracerProvider.
func (c *Config) tracer() trace.Tracer {
	if c.TracerProvider == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return c.TracerProvider.Tracer("github.com/drainpipe/drainpipe/job")
}

// startJob starts a run's span, which ends with endSpan.
func (c *Config) startJob(ctx context.Context, kind string) (context.Context, trace.Span) {
	return c.tracer().Start(ctx, kind+" "+c.Output, trace.WithAttributes(
		attribute.String("drainpipe.job.output", c.Output), attribute.StringSlice("drainpipe.job.inputs", c.Inputs),
		attribute.Bool("drainpipe.job.resume", c.Resume), attribute.String("drainpipe.job.shard", c.Shard.String())))
}

// endSpan ends a span, with err's status.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// partAttributes describe a committed part.
func partAttributes(index int, pt part, resumed bool) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Int("drainpipe.part.index", index), attribute.String("drainpipe.part.file", pt.File),
		attribute.Int64("drainpipe.part.rows", pt.Rows), attribute.Int64("drainpipe.part.bytes", pt.Size),
		attribute.Int64("drainpipe.part.input_end", pt.InEnd), attribute.Int64("drainpipe.part.rows_set_aside", pt.AsideRows),
		attribute.Bool("drainpipe.part.resumed", resumed),
	}
}

// resumedSpan records a part or unit an earlier run committed: a span of
// no length under ctx's.
func resumedSpan(ctx context.Context, t trace.Tracer, name string, attrs []attribute.KeyValue) {
	_, span := t.Start(ctx, name, trace.WithAttributes(attrs...))
	span.End()
}

// unitAttributes describe a unit and what its file holds.
func unitAttributes(u Unit, rows, setAside int64, resumed bool) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("drainpipe.unit.name", u.Name()), attribute.String("drainpipe.unit.input", u.Input),
		attribute.Int64("drainpipe.unit.first_row", u.FirstRow), attribute.Int64("drainpipe.part.rows", rows),
		attribute.Int64("drainpipe.part.rows_set_aside", setAside), attribute.Bool("drainpipe.part.resumed", resumed),
	}
}
