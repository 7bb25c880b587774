package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// errUnauthenticated is a request without one of the server's keys. The
// message names what to send, never what was sent.
var errUnauthenticated = &Error{Code: CodeUnauthenticated, Err: errors.New("no API key, or not one of the server's: send Authorization: Bearer KEY")}

// keyring holds the API keys that every door checks: the keys given to
// WithAPIKeys, and those of WithAPIKeyFile's file, read again when the
// file changes (looked at no more than once a recheck), so keys rotate
// without a restart.
type keyring struct {
	static  [][]byte
	file    string
	recheck time.Duration
	keys    atomic.Pointer[[][]byte]
	next    atomic.Int64 // when to look at the file again, Unix ns
	mu      sync.Mutex   // one reader of the file at a time
	stamp   fileStamp    // the file read last; under mu
	// failures counts refused requests by protocol.
	failures *prometheus.CounterVec
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

// newKeyring returns the server's keys, nil when it takes every request.
// A key file must hold a key now; later a file that cannot be read or
// holds none keeps the keys read before (and says so in the log).
func newKeyring(static [][]byte, file string, reg prometheus.Registerer) (*keyring, error) {
	if len(static) == 0 && file == "" {
		return nil, nil
	}
	k := &keyring{static: static, file: file, recheck: time.Second}
	if file != "" {
		if err := k.reload(); err != nil {
			return nil, err
		}
	} else {
		k.keys.Store(&static)
	}
	k.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "drainpipe_auth_failures_total",
		Help: "Requests refused for want of one of the server's API keys, by protocol.",
	}, []string{"protocol"})
	if err := reg.Register(k.failures); err != nil {
		return nil, err
	}
	return k, nil
}

// reload reads the key file if it changed since it was read.
func (k *keyring) reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	info, err := os.Stat(k.file)
	if err != nil {
		return fmt.Errorf("serve: API key file: %w", err)
	}
	stamp := fileStamp{info.Size(), info.ModTime()}
	if k.keys.Load() != nil && stamp == k.stamp {
		return nil
	}
	keys, err := readAPIKeys(k.file)
	if err != nil {
		return err
	}
	all := append(append([][]byte{}, k.static...), keys...)
	k.keys.Store(&all)
	k.stamp = stamp
	return nil
}

// readAPIKeys reads a key file: a key a line, blank lines and
// surrounding spaces skipped. A file with no key is an error.
func readAPIKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("serve: API key file: %w", err)
	}
	var keys [][]byte
	for line := range strings.Lines(string(data)) {
		if key := strings.TrimSpace(line); key != "" {
			keys = append(keys, []byte(key))
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("serve: API key file %s: no key in it", path)
	}
	return keys, nil
}

// allows reports whether token is one of the keys, comparing with each
// in constant time.
func (k *keyring) allows(token string) bool {
	if k.file != "" {
		if now := time.Now().UnixNano(); now >= k.next.Load() {
			k.next.Store(now + int64(k.recheck))
			// A file being rewritten may read empty for a moment: the
			// keys read before stay until it holds keys again.
			k.reload()
		}
	}
	found := 0
	for _, key := range *k.keys.Load() {
		found |= subtle.ConstantTimeCompare([]byte(token), key)
	}
	return token != "" && found == 1
}

// bearer returns the token of an Authorization value "Bearer TOKEN".
func bearer(value string) string {
	scheme, token, ok := strings.Cut(value, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return token
}

// probes answer without a key: an orchestrator's liveness and readiness
// checks carry none.
var probes = map[string]bool{"/v2/health/live": true, "/v2/health/ready": true}

// guard lets through to next only requests that bear a key, but for the
// probes (and /metrics when public). A refusal is answered in the shape
// of the protocol the path belongs to, before anything of the body is
// read.
func (s *Server) guard(next http.Handler) http.Handler {
	if s.keys == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probes[r.URL.Path] || (r.URL.Path == "/metrics" && s.cfg.metricsPublic) || s.keys.allows(bearer(r.Header.Get("Authorization"))) {
			next.ServeHTTP(w, r)
			return
		}
		protocol := doorOf(r.URL.Path)
		s.keys.failures.WithLabelValues(protocol).Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="drainpipe"`)
		switch protocol {
		case "openai":
			writeOpenAIError(w, errUnauthenticated)
		case "tei":
			writeTEIError(w, errUnauthenticated)
		default:
			writeError(w, errUnauthenticated)
		}
	})
}

// doorOf names the protocol a REST path belongs to, as the metrics do.
func doorOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/v1/") || path == "/v1":
		return "openai"
	case strings.HasPrefix(path, "/v2/") || path == "/v2":
		return "rest"
	case path == "/metrics":
		return "metrics"
	}
	return "tei"
}

// grpcGuard refuses, before the stream is made (so before a message is
// read), a call without a key in its authorization metadata, but for the
// health service's (the probes').
func (s *Server) grpcGuard(ctx context.Context, info *tap.Info) (context.Context, error) {
	if strings.HasPrefix(info.FullMethodName, "/"+healthpb.Health_ServiceDesc.ServiceName+"/") {
		return ctx, nil
	}
	for _, v := range info.Header.Get("authorization") {
		if s.keys.allows(bearer(v)) {
			return ctx, nil
		}
	}
	s.keys.failures.WithLabelValues("grpc").Inc()
	return ctx, status.Error(codes.Unauthenticated, errUnauthenticated.Error())
}
