package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
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
	CodeMethod:      http.StatusMethodNotAllowed,
	CodeSlowBody:    http.StatusRequestTimeout,

	CodeUnauthenticated: http.StatusUnauthorized,
}

// Handler returns the REST endpoints of every protocol and /metrics,
// behind the API key when the server has one.
func (s *Server) Handler() http.Handler { return s.guard(s.budget.hold(s.routes())) }

// router is a ServeMux that keeps the patterns it was given, so that a
// test can call every route there is.
type router struct {
	*http.ServeMux
	patterns []string
}

func (r *router) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	r.patterns = append(r.patterns, pattern)
	r.ServeMux.HandleFunc(pattern, h)
}

func (r *router) Handle(pattern string, h http.Handler) {
	r.patterns = append(r.patterns, pattern)
	r.ServeMux.Handle(pattern, h)
}

// routes returns the REST endpoints, unguarded.
func (s *Server) routes() *router {
	mux := &router{ServeMux: http.NewServeMux()}
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
		mux.HandleFunc("GET "+base+"/stats", s.restModelStats)
	}
	mux.HandleFunc("GET /v2/models/stats", s.restModelStats)
	if s.repo != nil {
		mux.HandleFunc("POST /v2/repository/index", s.restRepositoryIndex)
		mux.HandleFunc("POST /v2/repository/models/{name}/load", s.restRepositoryLoad)
		mux.HandleFunc("POST /v2/repository/models/{name}/unload", s.restRepositoryUnload)
	}
	mux.HandleFunc("POST /v1/embeddings", s.openAIEmbeddings)
	mux.HandleFunc("GET /v1/models", s.openAIModels)
	mux.HandleFunc("GET /v1/models/{model}", s.openAIModels)
	s.teiRoutes(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.registry, promhttp.HandlerOpts{Registry: s.cfg.registry}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux.ServeMux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, &Error{Code: CodeMethod, Err: fmt.Errorf("%s %s: the endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, " or "))})
			return
		}
		writeError(w, &Error{Code: CodeNotFound, Err: fmt.Errorf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// allowed returns the methods the endpoint at r's path takes, if it is
// one (r's own method did not match it).
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			out = append(out, m)
		}
	}
	return out
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
	writeJSON(w, http.StatusOK, map[string]any{"name": s.cfg.name, "version": s.cfg.version, "extensions": s.extensions()})
}

// extensions returns the protocol extensions the server implements, as
// its metadata advertises them.
func (s *Server) extensions() []string {
	ext := []string{"statistics", "binary_tensor_data"}
	if s.repo != nil {
		ext = append(ext, "model_repository")
	}
	return ext
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
	writeJSON(w, http.StatusOK, modelMetadataJSON{Name: m.name, Versions: s.reg.versions(m.name), Platform: m.platform, Inputs: m.listedInputs(), Outputs: m.outputs})
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
// gRPC messages' JSON mapping). A request is checked against the bounds
// (checkDeclaredJSON) before it is decoded into these.
type restInferRequest struct {
	ID         string        `json:"id"`
	Parameters jsonParams    `json:"parameters"`
	Inputs     []restInput   `json:"inputs"`
	Outputs    []restOutputs `json:"outputs"`
}

// jsonParams is an object of parameters, each value as the request wrote it.
type jsonParams map[string]json.RawMessage

type restInput struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters jsonParams      `json:"parameters"`
	Data       json.RawMessage `json:"data"`
}

type restOutputs struct {
	Name       string     `json:"name"`
	Parameters jsonParams `json:"parameters"`
}

type restTensor struct {
	Name       string         `json:"name"`
	Datatype   string         `json:"datatype"`
	Shape      []int64        `json:"shape"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       any            `json:"data,omitempty"`
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
	// The answer gets as long to leave as the body had to arrive: a
	// client that does not read it is let go.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.bodyTimeout))
	status := http.StatusOK
	if err != nil {
		status = writeError(w, err)
	} else {
		writeInferResponse(w, req, resp)
	}
	s.finish(r.Context(), "http", r.PathValue("name"), strconv.Itoa(status), r.RemoteAddr, req, resp, time.Since(began), err)
}

func (s *Server) decodeREST(w http.ResponseWriter, r *http.Request) (*inferRequest, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	var binary []byte
	if h := r.Header.Get(BinaryHeader); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 || n > len(body) {
			return nil, invalid(fmt.Errorf("header %s: %q is not a length within the body's %d bytes", BinaryHeader, h, len(body)))
		}
		body, binary = body[:n], body[n:]
	}
	m, err := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		return nil, err
	}
	req, err := decodeInferJSON(body, binary, r.Header.Get(TimeoutHeader), m.admits)
	if err != nil {
		return nil, err
	}
	// The version the client named, or none: a reload between this look
	// and the inference serves the latest then.
	req.model, req.version = r.PathValue("name"), r.PathValue("version")
	return req, nil
}

// decodeInferJSON decodes the REST infer request body: its JSON, and the
// binary tensors after it (the binary tensor data extension) in binary;
// timeoutHeader is the request's TimeoutHeader, if any. admit, if not
// nil, checks each input's declared shape before its data is decoded.
func decodeInferJSON(body, binary []byte, timeoutHeader string, admit func(name string, shape []int64) error) (*inferRequest, error) {
	if err := checkDeclaredJSON(body); err != nil {
		return nil, &Error{Code: CodeTooLarge, Err: err}
	}
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
		if admit != nil {
			if err := admit(t.Name, t.Shape); err != nil {
				return nil, err
			}
		}
		size, isBinary, err := binarySize(t.Parameters, "binary_data_size")
		if err != nil {
			return nil, invalid(fmt.Errorf("input %q: %w", t.Name, err))
		}
		var data any
		switch {
		case isBinary:
			if want := int64(n * rawSize(d)); (size != want && !variable(d, int(size), n)) || size > int64(len(binary)) {
				return nil, invalid(fmt.Errorf("input %q: binary_data_size %d: shape %v of %s takes %d bytes, %d are left in the body", t.Name, size, t.Shape, t.Datatype, want, len(binary)))
			}
			data, err = d.fromRaw(binary[:size], n)
			binary = binary[size:]
		case len(t.Data) == 0:
			return nil, invalid(fmt.Errorf("input %q: no data", t.Name))
		default:
			data, err = d.fromJSON(t.Data, t.Shape, n)
		}
		if err != nil {
			return nil, invalid(fmt.Errorf("input %q: %w", t.Name, err))
		}
		tn := &tensor{name: t.Name, datatype: t.Datatype, shape: t.Shape, data: data}
		if err := checkLength(tn, n); err != nil {
			return nil, invalid(err)
		}
		req.inputs = append(req.inputs, tn)
	}
	if len(binary) > 0 {
		return nil, invalid(fmt.Errorf("%d bytes of binary data after the inputs that take binary data", len(binary)))
	}
	if all, _, err := sizeOrFlag("binary_data_output", in.Parameters["binary_data_output"]); err != nil {
		return nil, invalid(fmt.Errorf("parameter binary_data_output: %w", err))
	} else if all == 1 {
		req.binaryOut = map[string]bool{"": true}
	}
	for _, o := range in.Outputs {
		req.outputs = append(req.outputs, o.Name)
		if on, _, err := binarySize(o.Parameters, "binary_data"); err != nil {
			return nil, invalid(fmt.Errorf("output %q: %w", o.Name, err))
		} else if on == 1 {
			if req.binaryOut == nil {
				req.binaryOut = map[string]bool{}
			}
			req.binaryOut[o.Name] = true
		}
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

// finish writes the access log and the request metrics.
func (s *Server) finish(ctx context.Context, protocol, model, code, remote string, req *inferRequest, resp *inferResponse, took time.Duration, err error) {
	s.metrics.request(s.modelLabel(model), protocol, code, took)
	if !s.logsRequests(ctx) {
		return
	}
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

// logsRequests reports whether the access log is on: a line a request
// costs CPU a busy server may not spare, so it is off by default.
func (s *Server) logsRequests(ctx context.Context) bool {
	return s.cfg.accessLog && s.cfg.logger.Enabled(ctx, slog.LevelInfo)
}

// unknownModel is the metrics' model label of every name the server does
// not serve: a client that makes names up adds one label value, not one
// series a name.
const unknownModel = "_unknown"

func (s *Server) modelLabel(name string) string {
	if s.served[name] || s.reg.has(name) {
		return name
	}
	return unknownModel
}

// retryAfter tells a client refused for the server's load when to try
// again (a second: queues and the budget drain in milliseconds).
func retryAfter(w http.ResponseWriter, err error) {
	if codeOf(err) == CodeOverloaded {
		w.Header().Set("Retry-After", "1")
	}
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
	retryAfter(w, err)
	status := httpStatus[codeOf(err)]
	writeJSON(w, status, map[string]string{"error": err.Error()})
	return status
}
