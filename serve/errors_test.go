package serve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainpipe/drainpipe/device"
	dptensor "github.com/drainpipe/drainpipe/tensor"
)

// refusing is a model that refuses, as a row error, a row whose first
// feature is 999 (as an encoder refuses an id past its vocabulary).
type refusing struct{ device.Model }

func (r refusing) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := r.Model.Start(ctx, cfg)
	return refusingSession{s}, err
}

type refusingSession struct{ device.Session }

func (s refusingSession) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	col := b.Record.Column(b.Record.Schema().FieldIndices("features")[0])
	vals, err := dptensor.Float32(col, features)
	if err != nil {
		return nil, err
	}
	for i := range b.Rows() {
		if vals[i*features] == 999 {
			return nil, &device.RowError{Row: int64(i), Column: "features", Err: errors.New("a value the model refuses")}
		}
	}
	return s.Session.Predict(ctx, b)
}

// A row the model refuses is the request's fault: 400 over REST,
// INVALID_ARGUMENT over gRPC, naming why, never a server error; the
// requests beside it are answered.
func TestRowErrorIsTheClients(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, refusing{testMLP(t)})})
	bad := rows(0, 1)
	bad[0][0] = 999
	code, body := r.do(t, http.MethodPost, "/v2/models/mlp/infer", inferBody(bad, false, nil), nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "a value the model refuses") {
		t.Errorf("REST: %d %s, want 400 naming the refusal", code, body)
	}
	if _, err := r.grpc.ModelInfer(t.Context(), grpcInferRequest(bad)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC: %v, want INVALID_ARGUMENT", err)
	}
	if code, body := r.do(t, http.MethodPost, "/v2/models/mlp/infer", inferBody(rows(0, 2), false, nil), nil); code != http.StatusOK {
		t.Errorf("a good request: %d %s", code, body)
	}
}
