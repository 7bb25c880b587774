package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drainpipe/drainpipe/online"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// startModels starts the models one after another; a failure closes the
// ones started.
func (s *Server) startModels(ctx context.Context) error {
	for _, spec := range s.specs {
		if _, err := s.load(ctx, spec, fileState{}); err != nil {
			return err
		}
	}
	if s.repo != nil {
		if err := s.repo.syncAll(ctx, false); err != nil && s.cfg.exitOnError {
			return fmt.Errorf("serve: model repository: %w", err)
		}
	}
	return nil
}

// load starts a model (its sessions, its warm-up) and then serves it; a
// model it replaces (the same name and version) is retired.
func (s *Server) load(ctx context.Context, spec ModelSpec, source fileState) (*model, error) {
	began := time.Now()
	var obs online.Observer = s.metrics.observer(spec.Name)
	if s.cfg.tracing != nil {
		obs = &tracingObserver{Observer: obs, tracer: s.tracer(), model: spec.Name, version: cmp.Or(spec.Version, DefaultVersion),
			sequence: spec.Sequence != nil}
	}
	m, err := start(ctx, spec, s.cfg.logger.With("model", spec.Name), obs)
	if err != nil {
		return nil, err
	}
	m.source, m.note = source, spec.note
	m.ready.Store(true)
	if old := s.reg.add(m); old != nil {
		s.retire(old)
	}
	if s.isStarted() && !s.draining.Load() {
		s.health.SetServingStatus(m.name, healthpb.HealthCheckResponse_SERVING)
	}
	s.cfg.logger.Info("model ready", "model", m.name, "version", m.version, "inputs", names(m.listedInputs()), "outputs", names(m.outputs), "start", time.Since(began))
	return m, nil
}

// unload stops serving a version and retires it.
func (s *Server) unload(name, version string) {
	if m := s.reg.remove(name, version); m != nil {
		s.retire(m)
	}
	if !s.reg.has(name) {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
}

// retire closes a model taken out of the registry once the requests that
// found it are done: it answers what it has queued and in flight, then
// shuts its sessions down, exactly once.
func (s *Server) retire(m *model) {
	m.ready.Store(false)
	s.retiring.Go(func() {
		m.users.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.drainTimeout)
		defer cancel()
		if err := m.batcher.Close(ctx); err != nil {
			s.cfg.logger.Error("model retired", "model", m.name, "version", m.version, "error", err)
			return
		}
		s.cfg.logger.Info("model retired", "model", m.name, "version", m.version)
	})
}

// closeModels closes every started model's batcher, which logs its stats
// (a second Close returns the first's shutdown errors).
func (s *Server) closeModels(ctx context.Context) error {
	var errs []error
	for _, m := range s.reg.all() {
		m.ready.Store(false)
		if err := m.batcher.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("model %s version %s: %w", m.name, m.version, err))
		}
	}
	s.retiring.Wait()
	return errors.Join(errs...)
}

// lookup finds a model by name and version ("" for the latest).
func (s *Server) lookup(name, version string) (*model, error) {
	return s.find(name, version, false)
}

// acquire finds a model for a request, which releases it when done.
func (s *Server) acquire(name, version string) (*model, error) {
	return s.find(name, version, true)
}

func (s *Server) find(name, version string, use bool) (*model, error) {
	if !s.isStarted() {
		return nil, &Error{Code: CodeUnavailable, Err: errors.New("models are starting")}
	}
	if m, ok := s.reg.find(name, version, use); ok {
		return m, nil
	}
	if versions := s.reg.versions(name); len(versions) > 0 {
		return nil, &Error{Code: CodeNotFound, Err: fmt.Errorf("model %q has no version %q; it serves versions %v", name, version, versions)}
	}
	return nil, &Error{Code: CodeNotFound, Err: fmt.Errorf("no model %q; models: %v", name, s.reg.names())}
}
