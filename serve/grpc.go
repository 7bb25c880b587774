package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

var grpcCode = map[Code]codes.Code{
	CodeInvalid:     codes.InvalidArgument,
	CodeNotFound:    codes.NotFound,
	CodeTooLarge:    codes.ResourceExhausted,
	CodeOverloaded:  codes.ResourceExhausted,
	CodeCanceled:    codes.Canceled,
	CodeInternal:    codes.Internal,
	CodeUnavailable: codes.Unavailable,
	CodeDeadline:    codes.DeadlineExceeded,
	CodeMethod:      codes.Unimplemented,
	CodeSlowBody:    codes.DeadlineExceeded,

	CodeUnauthenticated: codes.Unauthenticated,
}

func grpcError(err error) error { return status.Error(grpcCode[codeOf(err)], err.Error()) }

// grpcService implements the protocol's GRPCInferenceService.
type grpcService struct {
	pb.UnimplementedGRPCInferenceServiceServer
	s *Server
	// garbled holds the infer requests whose bytes were not a message,
	// by the empty message the handler gets, with the decoding error.
	garbled sync.Map
}

// inferCodec is gRPC's proto codec, except that an infer request that is
// not a protobuf message, or declares more than the server takes (checked
// on its wire bytes, before decoding allocates what they declare),
// reaches the handler (empty, its error noted), to be answered
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED and counted as any bad request
// is: grpc-go answers a codec's error INTERNAL, before any handler sees
// it.
type inferCodec struct {
	encoding.CodecV2
	g *grpcService
}

func (c inferCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*pb.ModelInferRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	// What the message declares is checked before it is decoded (the
	// bytes once in one piece, as the proto codec has them).
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := checkInferWire(buf.ReadOnlyData()); err != nil {
		c.g.garbled.Store(req, &Error{Code: CodeTooLarge, Err: err})
		return nil
	}
	if err := c.g.s.admitWire(buf.ReadOnlyData()); err != nil {
		c.g.garbled.Store(req, err)
		return nil
	}
	if err := proto.Unmarshal(buf.ReadOnlyData(), req); err != nil {
		proto.Reset(req)
		c.g.garbled.Store(req, invalid(fmt.Errorf("not a ModelInferRequest message: %w", err)))
	}
	return nil
}

func (g *grpcService) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: g.s.isReady()}, nil
}

func (g *grpcService) ModelReady(_ context.Context, req *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	m, err := g.s.lookup(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	return &pb.ModelReadyResponse{Ready: m.ready.Load() && !g.s.draining.Load()}, nil
}

func (g *grpcService) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return &pb.ServerMetadataResponse{Name: g.s.cfg.name, Version: g.s.cfg.version, Extensions: g.s.extensions()}, nil
}

func (g *grpcService) ModelMetadata(_ context.Context, req *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	m, err := g.s.lookup(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	meta := func(ts []TensorMetadata) []*pb.ModelMetadataResponse_TensorMetadata {
		out := make([]*pb.ModelMetadataResponse_TensorMetadata, len(ts))
		for i, t := range ts {
			out[i] = &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
		}
		return out
	}
	return &pb.ModelMetadataResponse{Name: m.name, Versions: g.s.reg.versions(m.name), Platform: m.platform, Inputs: meta(m.listedInputs()), Outputs: meta(m.outputs)}, nil
}

// ModelInfer answers in the form it was asked: raw_output_contents for a
// request with raw_input_contents, typed contents otherwise.
func (g *grpcService) ModelInfer(ctx context.Context, in *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	began := time.Now()
	var req *inferRequest
	var err error
	if bad, ok := g.garbled.LoadAndDelete(in); ok {
		err = bad.(error)
	} else if n := int64(proto.Size(in)); !g.s.budget.take(n) {
		// The message is held until it is answered, as a REST body is.
		err = errBusy
	} else {
		defer g.s.budget.give(n)
		req, err = decodeGRPC(in)
	}
	var resp *inferResponse
	if err == nil {
		resp, err = g.s.infer(ctx, req)
	}
	var out *pb.ModelInferResponse
	if err == nil {
		out = encodeGRPC(resp, len(in.GetRawInputContents()) > 0)
	}
	code := codes.OK
	if err != nil {
		err = grpcError(err)
		code = status.Code(err)
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok && g.s.logsRequests(ctx) {
		remote = p.Addr.String() // for the access log alone
	}
	g.s.finish(ctx, "grpc", in.GetModelName(), code.String(), remote, req, resp, time.Since(began), err)
	return out, err
}

func (g *grpcService) ModelStatistics(_ context.Context, req *pb.ModelStatisticsRequest) (*pb.ModelStatisticsResponse, error) {
	stats, err := g.s.modelStats(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	out := &pb.ModelStatisticsResponse{}
	for _, st := range stats {
		out.ModelStats = append(out.ModelStats, st.pb())
	}
	return out, nil
}

func (g *grpcService) RepositoryIndex(ctx context.Context, req *pb.RepositoryIndexRequest) (*pb.RepositoryIndexResponse, error) {
	index, err := g.s.repositoryIndex(ctx, req.GetReady())
	if err != nil {
		return nil, grpcError(err)
	}
	out := &pb.RepositoryIndexResponse{}
	for _, e := range index {
		out.Models = append(out.Models, &pb.RepositoryIndexResponse_ModelIndex{Name: e.Name, Version: e.Version, State: e.State, Reason: e.Reason})
	}
	return out, nil
}

func (g *grpcService) RepositoryModelLoad(ctx context.Context, req *pb.RepositoryModelLoadRequest) (*pb.RepositoryModelLoadResponse, error) {
	if err := g.s.repositoryLoad(ctx, req.GetModelName()); err != nil {
		return nil, grpcError(err)
	}
	return &pb.RepositoryModelLoadResponse{}, nil
}

func (g *grpcService) RepositoryModelUnload(_ context.Context, req *pb.RepositoryModelUnloadRequest) (*pb.RepositoryModelUnloadResponse, error) {
	if err := g.s.repositoryUnload(req.GetModelName()); err != nil {
		return nil, grpcError(err)
	}
	return &pb.RepositoryModelUnloadResponse{}, nil
}

func decodeGRPC(in *pb.ModelInferRequest) (*inferRequest, error) {
	req := &inferRequest{model: in.GetModelName(), version: in.GetModelVersion(), id: in.GetId()}
	if p, ok := in.GetParameters()["timeout"]; ok {
		switch us := p.GetParameterChoice().(type) {
		case *pb.InferParameter_Int64Param:
			if us.Int64Param < 0 {
				return nil, invalid(fmt.Errorf("parameter timeout: %d microseconds", us.Int64Param))
			}
			req.timeout = micros(uint64(us.Int64Param))
		case *pb.InferParameter_Uint64Param:
			req.timeout = micros(us.Uint64Param)
		default:
			return nil, invalid(errors.New("parameter timeout: not an int64_param or uint64_param count of microseconds"))
		}
	}
	raw := in.GetRawInputContents()
	if len(in.GetInputs()) == 0 {
		return nil, invalid(errors.New("no inputs"))
	}
	if len(raw) > 0 && len(raw) != len(in.GetInputs()) {
		return nil, invalid(fmt.Errorf("raw_input_contents has %d entries for %d inputs", len(raw), len(in.GetInputs())))
	}
	for i, t := range in.GetInputs() {
		d, n, err := tensorType(t.GetName(), t.GetDatatype(), t.GetShape())
		if err != nil {
			return nil, invalid(err)
		}
		var data any
		switch {
		case len(raw) > 0 && t.GetContents() != nil:
			return nil, invalid(fmt.Errorf("input %q: both contents and raw_input_contents", t.GetName()))
		case len(raw) > 0:
			if size := rawSize(d); len(raw[i]) != n*size && !variable(d, len(raw[i]), n) {
				return nil, invalid(fmt.Errorf("input %q: shape %v of %s needs %d raw bytes, got %d", t.GetName(), t.GetShape(), t.GetDatatype(), n*size, len(raw[i])))
			}
			data, err = d.fromRaw(raw[i], n)
		case t.GetContents() == nil:
			return nil, invalid(fmt.Errorf("input %q: no contents and no raw_input_contents", t.GetName()))
		default:
			data, err = d.fromContents(t.GetContents())
		}
		if err != nil {
			return nil, invalid(fmt.Errorf("input %q: %w", t.GetName(), err))
		}
		tn := &tensor{name: t.GetName(), datatype: t.GetDatatype(), shape: t.GetShape(), data: data}
		if err := checkLength(tn, n); err != nil {
			return nil, invalid(fmt.Errorf("%w (%s elements travel in the contents field of their type)", err, t.GetDatatype()))
		}
		req.inputs = append(req.inputs, tn)
	}
	for _, o := range in.GetOutputs() {
		req.outputs = append(req.outputs, o.GetName())
	}
	return req, nil
}

func encodeGRPC(resp *inferResponse, raw bool) *pb.ModelInferResponse {
	out := &pb.ModelInferResponse{ModelName: resp.model, ModelVersion: resp.version, Id: resp.id}
	for _, t := range resp.outputs {
		o := &pb.ModelInferResponse_InferOutputTensor{Name: t.name, Datatype: t.datatype, Shape: t.shape}
		d := datatypes[t.datatype]
		if raw {
			out.RawOutputContents = append(out.RawOutputContents, d.toRaw(t.data))
		} else {
			o.Contents = d.toContents(t.data)
		}
		out.Outputs = append(out.Outputs, o)
	}
	return out
}
