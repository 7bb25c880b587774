package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/drainpipe/drainpipe/predict"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// ErrDrainTimeout reports a shutdown whose drain timeout passed before
// every request was answered: the ones left were refused.
var ErrDrainTimeout = errors.New("serve: drain timeout passed before every request was answered")

// Server serves models over the Open Inference Protocol (v2), REST and
// gRPC, each model through its own online batcher. Make one with New and
// run it with Run.
type Server struct {
	specs   []ModelSpec
	served  map[string]bool // the names of specs, for metric labels
	cfg     config
	metrics *metrics
	keys    *keyring // nil: every request is taken
	budget  *budget

	reg      registry
	retiring sync.WaitGroup // models taken out, closing once their requests are done
	repo     *repository    // nil without one
	ready    chan struct{}  // closed when every model has started
	draining atomic.Bool
	bodies   bodyReads
	health   *health.Server // grpc.health.v1
	// watchesEnd closes when the listeners stop: a grpc.health.v1 Watch,
	// a stream that never ends by itself, ends then (after it was told
	// NOT_SERVING), so it cannot hold a graceful stop to its timeout.
	watchesEnd chan struct{}
}

// New returns a server for the models. Nothing starts until Run.
func New(specs []ModelSpec, opts ...Option) (*Server, error) {
	cfg := config{name: "drainpipe", version: "devel", logger: slog.New(slog.DiscardHandler), maxBody: 64 << 20,
		bodyTimeout: 30 * time.Second, drainTimeout: 30 * time.Second, exitOnError: true}
	for _, o := range opts {
		o(&cfg)
	}
	if len(specs) == 0 && cfg.repository == nil {
		return nil, errors.New("serve: no models")
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if s.Name == "" {
			return nil, errors.New("serve: a model without a name")
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("serve: model %q given twice", s.Name)
		}
		seen[s.Name] = true
		// The options are checked now, before a caller binds its ports.
		if _, err := predict.New(s.Model, s.Options...); err != nil {
			return nil, fmt.Errorf("serve: model %s: %w", s.Name, err)
		}
		if s.Input == nil || s.Input.NumFields() == 0 {
			return nil, fmt.Errorf("serve: model %s: no input columns", s.Name)
		}
	}
	if cfg.registry == nil {
		cfg.registry = prometheus.NewRegistry()
		cfg.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	srv := &Server{specs: specs, served: seen, cfg: cfg, ready: make(chan struct{}), health: health.NewServer(), watchesEnd: make(chan struct{})}
	met, err := newMetrics(cfg.registry, &srv.reg)
	if err != nil {
		return nil, err
	}
	srv.metrics = met
	if srv.budget, err = newServerBudget(cfg); err != nil {
		return nil, err
	}
	if srv.keys, err = newKeyring(cfg.apiKeys, cfg.apiKeyFile, cfg.registry); err != nil {
		return nil, err
	}
	if cfg.repository != nil {
		srv.repo = newRepository(*cfg.repository, srv)
	}
	srv.setHealth(healthpb.HealthCheckResponse_NOT_SERVING) // until the models have started
	return srv, nil
}

// Ready is closed once every model's sessions have started and answered a
// warm-up row.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// isServing reports a server started and not draining.
func (s *Server) isServing() bool {
	select {
	case <-s.ready:
		return !s.draining.Load()
	default:
		return false
	}
}

// isReady reports readiness: every model started and not draining.
func (s *Server) isReady() bool {
	if !s.isServing() {
		return false
	}
	if s.repo != nil {
		if _, unserved := s.repo.unserved(); unserved {
			return false // strict: a model that should be served is not
		}
	}
	return true
}

// grpcWorkers is how many goroutines gRPC keeps to run requests on. An
// infer request waits for its batch, so each needs a goroutine: kept ones
// reuse their grown stacks, where a new goroutine a request grew its stack
// every time. Requests beyond them run on new goroutines.
const grpcWorkers = 256

// Run serves REST on httpLn and gRPC on grpcLn (either may be nil) until
// ctx ends, then shuts down gracefully: readiness turns false, the
// listeners close, the requests taken are answered, and every model's
// sessions shut down exactly once, all within the drain timeout. The
// listeners answer liveness at once and readiness once the models have
// started. Run returns nil after a clean drain, ErrDrainTimeout if
// requests had to be refused, or the error that kept it from serving.
func (s *Server) Run(ctx context.Context, httpLn, grpcLn net.Listener) error {
	log := s.cfg.logger
	if httpLn != nil {
		httpLn = netutil.LimitListener(httpLn, s.cfg.connLimit())
	}
	if grpcLn != nil {
		grpcLn = netutil.LimitListener(grpcLn, s.cfg.connLimit())
	}
	var httpSrv *http.Server
	var grpcSrv *grpc.Server
	errc := make(chan error, 2)
	var serving sync.WaitGroup
	if httpLn != nil {
		if s.cfg.tls != nil {
			cfg := s.cfg.tls.Clone()
			cfg.NextProtos = []string{"h2", "http/1.1"}
			httpLn = tls.NewListener(httpLn, cfg)
		}
		httpSrv = &http.Server{Handler: s.traced(s.Handler()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		serving.Go(func() {
			if err := httpSrv.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve: http: %w", err)
			}
		})
		log.Info("listening", "protocol", "http", "addr", httpLn.Addr().String())
	}
	if grpcLn != nil {
		grpcSrv = s.grpcServer()
		serving.Go(func() {
			if err := grpcSrv.Serve(grpcLn); err != nil {
				errc <- fmt.Errorf("serve: grpc: %w", err)
			}
		})
		log.Info("listening", "protocol", "grpc", "addr", grpcLn.Addr().String())
	}

	// Polling stops as the drain begins, however it begins.
	polling, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	startErr := s.startModels(ctx)
	var runErr error
	if startErr == nil {
		// Health first: whoever Ready() lets go finds the server serving.
		s.setHealth(healthpb.HealthCheckResponse_SERVING)
		close(s.ready)
		log.Info("ready", "models", s.reg.names())
		if s.repo != nil {
			serving.Go(func() { s.repo.poll(polling) })
		}
		select {
		case <-ctx.Done():
			log.Info("draining", "cause", context.Cause(ctx).Error(), "grace", s.cfg.drainGrace, "timeout", s.cfg.drainTimeout)
			s.draining.Store(true)
			s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
			// Still serving, while readiness says 503 and load balancers
			// take the server out; then no more.
			s.grace(errc, &runErr)
		case runErr = <-errc:
			log.Error("stopping", "error", runErr)
		}
	}
	stopPolling()
	s.draining.Store(true)
	s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	s.bodies.cutAll(min(s.cfg.bodyTimeout, bodyGrace))

	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.drainTimeout)
	defer cancel()
	timedOut := s.stopListeners(drainCtx, httpSrv, grpcSrv)
	serving.Wait()
	closeErr := s.closeModels(drainCtx)
	if timedOut {
		closeErr = errors.Join(closeErr, ErrDrainTimeout)
	}
	log.Info("stopped")
	return errors.Join(startErr, runErr, closeErr)
}

// grpcServer returns the gRPC server of the protocol, with grpc.health.v1
// and reflection beside it.
func (s *Server) grpcServer() *grpc.Server {
	service := &grpcService{s: s}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(s.cfg.maxBody)), grpc.MaxSendMsgSize(int(s.cfg.maxBody)),
		grpc.NumStreamWorkers(grpcWorkers), grpc.ChainStreamInterceptor(s.endWatches),
		grpc.MaxHeaderListSize(maxMetadataBytes),
		// A connection with no call for a while is closed; a client's
		// pings are taken (without a call too) at most this often.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: grpcIdle}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ForceServerCodecV2(inferCodec{CodecV2: encoding.GetCodecV2(protoenc.Name), g: service})}
	var spans *grpcSpans
	if s.cfg.tracing != nil {
		h := s.grpcTracing()
		spans = &h
		opts = append(opts, grpc.StatsHandler(h))
	}
	if s.keys != nil {
		opts = append(opts, grpc.InTapHandle(s.grpcGuard))
	}
	if s.cfg.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.tls)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterGRPCInferenceServiceServer(srv, service)
	// What Kubernetes' gRPC probes and grpcurl ask for.
	healthpb.RegisterHealthServer(srv, s.health)
	reflection.Register(srv)
	if spans != nil {
		spans.register(srv.GetServiceInfo())
	}
	return srv
}

// endWatches gives a health Watch stream a context that ends when the
// listeners stop.
func (s *Server) endWatches(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != healthpb.Health_Watch_FullMethodName {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	go func() {
		select {
		case <-s.watchesEnd:
			cancel()
		case <-ctx.Done():
		}
	}()
	return handler(srv, &watchStream{ServerStream: ss, ctx: ctx})
}

// watchStream is a stream with a context of its own.
type watchStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *watchStream) Context() context.Context { return w.ctx }

// grpcIdle is how long a gRPC connection with no call stays open (REST's
// idle connections: the http.Server's IdleTimeout).
const grpcIdle = 5 * time.Minute

// connLimit is the connections a listener holds at once.
func (c *config) connLimit() int {
	if c.maxConns > 0 {
		return c.maxConns
	}
	limit := 4096
	if fds, ok := fdLimit(); ok && fds/3 < uint64(limit) {
		limit = max(int(fds/3), 16)
	}
	return limit
}

// maxMetadataBytes bounds a gRPC call's metadata (its headers), as HTTP
// servers and proxies bound headers (grpc-go's own default is 16 MiB a
// call).
const maxMetadataBytes = 64 << 10

// bodyGrace is how long a drain lets a request body still arriving take.
const bodyGrace = time.Second

// setHealth sets the gRPC health of the server ("") and of each model
// (by name).
func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	for _, spec := range s.specs {
		s.health.SetServingStatus(spec.Name, st)
	}
	for _, name := range s.reg.names() {
		s.health.SetServingStatus(name, st)
	}
}

// grace waits the drain grace, or until a listener fails.
func (s *Server) grace(errc <-chan error, runErr *error) {
	if s.cfg.drainGrace <= 0 {
		return
	}
	t := time.NewTimer(s.cfg.drainGrace)
	defer t.Stop()
	select {
	case <-t.C:
	case *runErr = <-errc:
	}
}

// stopListeners stops taking requests and waits for the ones taken. If
// ctx ends first, it refuses what waits in the batchers (which answers
// the requests still open), gives their answers up to a second to leave,
// closes the connections left and reports that it timed out.
func (s *Server) stopListeners(ctx context.Context, httpSrv *http.Server, grpcSrv *grpc.Server) (timedOut bool) {
	close(s.watchesEnd)
	var wg sync.WaitGroup
	if httpSrv != nil {
		wg.Go(func() { httpSrv.Shutdown(ctx) }) // returns when ctx ends at the latest
	}
	if grpcSrv != nil {
		wg.Go(grpcSrv.GracefulStop)
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		if ctx.Err() == nil {
			return false
		}
	case <-ctx.Done():
	}
	s.closeModels(ctx)
	// The requests left now fail at once; let their answers leave before
	// the connections close.
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if httpSrv != nil {
		httpSrv.Shutdown(grace)
		httpSrv.Close()
	}
	if grpcSrv != nil {
		select {
		case <-stopped:
		case <-grace.Done():
		}
		grpcSrv.Stop()
	}
	<-stopped
	return true
}

func (s *Server) isStarted() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// inferRequest is a decoded infer request of either protocol.
type inferRequest struct {
	model, version, id string
	inputs             []*tensor
	outputs            []string        // requested; empty: all
	binaryOut          map[string]bool // outputs to answer in binary (REST), by name; "" for all
	timeout            time.Duration   // 0: the model's default
}

type inferResponse struct {
	model, version, id string
	outputs            []*tensor
	rows               int
}

// infer checks a request, runs it through the model's batcher and copies
// out the requested outputs.
func (s *Server) infer(ctx context.Context, req *inferRequest) (*inferResponse, error) {
	m, err := s.acquire(req.model, req.version)
	if err != nil {
		return nil, err
	}
	defer m.users.Done()
	if err := m.checkOutputs(req.outputs); err != nil {
		return nil, invalid(err)
	}
	inputs := req.inputs
	if m.text != nil {
		if inputs, err = m.textTensors(inputs); err != nil {
			return nil, invalid(err)
		}
	}
	rec, rows, err := m.record(inputs)
	if err != nil {
		return nil, invalid(err)
	}
	defer rec.Release()
	resp := &inferResponse{model: m.name, version: m.version, id: req.id, rows: rows}
	if rows == 0 {
		resp.outputs = m.emptyOutputs(req.outputs)
		return resp, nil
	}
	if req.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.timeout)
		defer cancel()
	}
	out, err := m.batcher.Predict(ctx, rec)
	if err != nil {
		if dl, ok := ctx.Deadline(); ok && errors.Is(err, context.Canceled) && !time.Now().Before(dl) {
			// The client gave up at its deadline a moment before the
			// server's copy of it passed (gRPC cancels the stream).
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return nil, predictError(err)
	}
	defer out.Release()
	if resp.outputs, err = m.tensors(out, req.outputs); err != nil {
		return nil, &Error{Code: CodeInternal, Err: err}
	}
	return resp, nil
}
