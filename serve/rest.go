package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TimeoutHeader is the REST request header that sets a request's deadline,
// as a Go duration ("250ms") or seconds ("0.25"). The request parameter
// "timeout", in microseconds (Triton's), does the same in both protocols.
const TimeoutHeader = "Request-Timeout"

var httpStatus = map[Code]int{
	CodeInvalid:     http.StatusBadRequest,
	CodeNotFound:    http.StatusNotFound,
	CodeTooLarge:    http.StatusRequestEntityTooLarge,
	CodeOverloaded:  http.StatusTooManyRequests,
	CodeCanceled:    499, // nginx's "client closed request": no one reads it
	CodeInternal:    http.StatusInternalServerError,
	CodeUnavailable: http.StatusServiceUnavailable,
	CodeDeadline:    http.StatusGatewayTimeout,
}

// Handler returns the REST endpoints of the protocol and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2", s.restServerMetadata)
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
	})
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		ready := s.isReady()
		writeJSON(w, readyStatus(ready), map[string]bool{"ready": ready})
	})
	for _, base := range []string{"/v2/models/{name}", "/v2/models/{name}/versions/{version}"} {
		mux.HandleFunc("GET "+base, s.restModelMetadata)
		mux.HandleFunc("GET "+base+"/ready", s.restModelReady)
		mux.HandleFunc("POST "+base+"/infer", s.restInfer)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.registry, promhttp.HandlerOpts{Registry: s.cfg.registry}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Code: CodeNotFound, Err: fmt.Errorf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// readyStatus is 200 when ready and 503 when not, so that a probe reading
// only the status (Kubernetes') sees the difference.
func readyStatus(ready bool) int {
	if ready {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

func (s *Server) restServerMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"name": s.cfg.name, "version": s.cfg.version, "extensions": []string{}})
}

type modelMetadataJSON struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions"`
	Platform string           `json:"platform"`
	Inputs   []TensorMetadata `json:"inputs"`
	Outputs  []TensorMetadata `json:"outputs"`
}

func (s *Server) restModelMetadata(w http.ResponseWriter, r *http.Request) {
	m, err := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, modelMetadataJSON{Name: m.name, Versions: []string{m.version}, Platform: m.platform, Inputs: m.inputs, Outputs: m.outputs})
}

func (s *Server) restModelReady(w http.ResponseWriter, r *http.Request) {
	m, err := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	ready := m.ready.Load() && !s.draining.Load()
	writeJSON(w, readyStatus(ready), map[string]any{"name": m.name, "ready": ready})
}

// The REST request and response of infer (the protocol's JSON, not the
// gRPC messages' JSON mapping).
type restInferRequest struct {
	ID         string                     `json:"id"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Inputs     []struct {
		Name       string          `json:"name"`
		Shape      []int64         `json:"shape"`
		Datatype   string          `json:"datatype"`
		Parameters json.RawMessage `json:"parameters"`
		Data       json.RawMessage `json:"data"`
	} `json:"inputs"`
	Outputs []struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"outputs"`
}

type restTensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
	Data     any     `json:"data"`
}

type restInferResponse struct {
	ModelName    string       `json:"model_name"`
	ModelVersion string       `json:"model_version"`
	ID           string       `json:"id,omitempty"`
	Outputs      []restTensor `json:"outputs"`
}

func (s *Server) restInfer(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	req, err := s.decodeREST(w, r)
	var resp *inferResponse
	if err == nil {
		resp, err = s.infer(r.Context(), req)
	}
	status := http.StatusOK
	if err != nil {
		status = writeError(w, err)
	} else {
		out := restInferResponse{ModelName: resp.model, ModelVersion: resp.version, ID: resp.id, Outputs: make([]restTensor, len(resp.outputs))}
		for i, t := range resp.outputs {
			out.Outputs[i] = restTensor{Name: t.name, Datatype: t.datatype, Shape: t.shape, Data: t.data}
		}
		writeJSON(w, status, out)
	}
	s.finish(r.Context(), "http", r.PathValue("name"), strconv.Itoa(status), r.RemoteAddr, req, resp, time.Since(began), err)
}

func (s *Server) decodeREST(w http.ResponseWriter, r *http.Request) (*inferRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &Error{Code: CodeTooLarge, Err: fmt.Errorf("request body over %d bytes", tooLarge.Limit)}
		}
		return nil, &Error{Code: CodeCanceled, Err: fmt.Errorf("reading the request: %w", err)}
	}
	req, err := decodeInferJSON(body, r.Header.Get(TimeoutHeader))
	if err != nil {
		return nil, err
	}
	req.model, req.version = r.PathValue("name"), r.PathValue("version")
	return req, nil
}

// decodeInferJSON decodes the REST infer request body; timeoutHeader is
// the request's TimeoutHeader, if any.
func decodeInferJSON(body []byte, timeoutHeader string) (*inferRequest, error) {
	var in restInferRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, invalid(fmt.Errorf("malformed JSON request: %w", err))
	}
	req := &inferRequest{id: in.ID}
	var err error
	if req.timeout, err = restTimeout(timeoutHeader, in.Parameters["timeout"]); err != nil {
		return nil, invalid(err)
	}
	if len(in.Inputs) == 0 {
		return nil, invalid(errors.New("no inputs"))
	}
	for _, t := range in.Inputs {
		d, n, err := tensorType(t.Name, t.Datatype, t.Shape)
		if err != nil {
			return nil, invalid(err)
		}
		if len(t.Data) == 0 {
			return nil, invalid(fmt.Errorf("input %q: no data", t.Name))
		}
		data, err := d.fromJSON(t.Data, t.Shape, n)
		if err != nil {
			return nil, invalid(fmt.Errorf("input %q: %w", t.Name, err))
		}
		tn := &tensor{name: t.Name, datatype: t.Datatype, shape: t.Shape, data: data}
		if err := checkLength(tn, n); err != nil {
			return nil, invalid(err)
		}
		req.inputs = append(req.inputs, tn)
	}
	for _, o := range in.Outputs {
		req.outputs = append(req.outputs, o.Name)
	}
	return req, nil
}

// tensorType looks a tensor's datatype up and counts its elements.
func tensorType(name, datatype string, shape []int64) (dtype, int, error) {
	d, ok := datatypes[datatype]
	if !ok {
		return nil, 0, fmt.Errorf("input %q: datatype %q is not one drainpipe models take (BOOL, INT8–64, UINT8–64, FP32, FP64)", name, datatype)
	}
	if len(shape) == 0 {
		return nil, 0, fmt.Errorf("input %q: no shape", name)
	}
	n, err := elements(shape)
	if err != nil {
		return nil, 0, fmt.Errorf("input %q: %w", name, err)
	}
	return d, n, nil
}

// checkLength checks that a tensor holds as many elements as its shape.
func checkLength(t *tensor, n int) error {
	if got := lenOf(t.data); got != n {
		return fmt.Errorf("input %q: shape %v holds %d elements, data has %d", t.name, t.shape, n, got)
	}
	return nil
}

func lenOf(data any) int { return reflect.ValueOf(data).Len() }

// restTimeout reads a request's timeout from the header or the "timeout"
// parameter (microseconds).
func restTimeout(header string, param json.RawMessage) (time.Duration, error) {
	if header != "" {
		if d, err := time.ParseDuration(header); err == nil && d > 0 {
			return d, nil
		}
		if secs, err := strconv.ParseFloat(header, 64); err == nil && secs > 0 {
			return time.Duration(secs * float64(time.Second)), nil
		}
		return 0, fmt.Errorf("header %s: %q is neither a duration (250ms) nor seconds (0.25)", TimeoutHeader, header)
	}
	if len(param) == 0 {
		return 0, nil
	}
	var us int64
	if err := json.Unmarshal(param, &us); err != nil || us < 0 {
		return 0, fmt.Errorf("parameter timeout: %s is not a count of microseconds", param)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// finish writes the access log and the request metrics.
func (s *Server) finish(ctx context.Context, protocol, model, code, remote string, req *inferRequest, resp *inferResponse, took time.Duration, err error) {
	s.metrics.request(s.modelLabel(model), protocol, code, took)
	attrs := []slog.Attr{slog.String("protocol", protocol), slog.String("model", model), slog.String("code", code), slog.Duration("took", took)}
	if req != nil && req.id != "" {
		attrs = append(attrs, slog.String("id", req.id))
	}
	if resp != nil {
		attrs = append(attrs, slog.Int("rows", resp.rows))
	}
	if remote != "" {
		attrs = append(attrs, slog.String("remote", remote))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

// unknownModel is the metrics' model label of every name the server does
// not serve: a client that makes names up adds one label value, not one
// series a name.
const unknownModel = "_unknown"

func (s *Server) modelLabel(name string) string {
	if s.served[name] {
		return name
	}
	return unknownModel
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, fmt.Appendf(nil, `{"error":%q}`, "encoding the response: "+err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers {"error": "..."} with the error's status.
func writeError(w http.ResponseWriter, err error) int {
	status := httpStatus[codeOf(err)]
	writeJSON(w, status, map[string]string{"error": err.Error()})
	return status
}
