package serve

import (
	"crypto/tls"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
)

type config struct {
	name, version string
	logger        *slog.Logger
	registry      *prometheus.Registry
	maxBody       int64
	accessLog     bool
	tls           *tls.Config
	repository    *Repository
	bodyTimeout   time.Duration
	drainTimeout  time.Duration
	drainGrace    time.Duration
	maxConns      int
	exitOnError   bool
	apiKeys       [][]byte
	apiKeyFile    string
	maxInflight   int64
	metricsPublic bool
	tracing       trace.TracerProvider
}

// Option configures a Server.
type Option func(*config)

// WithLogger sets where the server logs (access logs at Info). The default
// discards.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithTracerProvider sets where the server's spans go: a span a request,
// continuing the caller's W3C traceparent, and a span a batch, linked
// both ways to the requests it served. Without it the server traces
// nothing and costs nothing for it; the library links no exporter (the
// command chooses one from OTEL_*).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tracing = tp } }

// WithRegistry sets the Prometheus registry the server's metrics join. The
// default is a registry of the server's own, with Go and process metrics.
func WithRegistry(r *prometheus.Registry) Option { return func(c *config) { c.registry = r } }

// WithAccessLog turns the access log (a line a request, at Info) on or
// off. The default is off: a line a request cost a busy server 7% of its
// CPU; the metrics count every request either way.
func WithAccessLog(on bool) Option { return func(c *config) { c.accessLog = on } }

// WithMaxRequestBytes bounds a request body (REST) or message (gRPC). The
// default is 64 MiB.
func WithMaxRequestBytes(n int64) Option { return func(c *config) { c.maxBody = n } }

// WithMaxInflightBytes bounds the request bytes all requests hold at
// once, REST bodies and gRPC messages together: one that would pass it is
// refused at once (429 with Retry-After; RESOURCE_EXHAUSTED), so no set
// of concurrent clients takes the process past it. It must hold one
// request of WithMaxRequestBytes. The default is half the Go memory limit
// (GOMEMLIMIT) when one is set, else 1 GiB, and at least one request.
func WithMaxInflightBytes(n int64) Option { return func(c *config) { c.maxInflight = n } }

// WithDrainTimeout bounds a graceful shutdown. The default is 30s.
func WithDrainTimeout(d time.Duration) Option { return func(c *config) { c.drainTimeout = d } }

// WithExitOnError sets whether a repository model that fails to load at
// start fails Run (Triton's --exit-on-error, true by default); false
// serves the others, and lists the failure in the index.
func WithExitOnError(on bool) Option { return func(c *config) { c.exitOnError = on } }

// WithMaxConnections bounds the connections each listener holds open at
// once; one more waits (in the kernel's backlog) until one closes. The
// default is 4,096, or a third of the process's file descriptor limit if
// that is less, so no flood of idle connections on one listener can take
// the descriptors the other (and liveness) needs.
func WithMaxConnections(n int) Option { return func(c *config) { c.maxConns = n } }

// WithDrainGrace sets how long a shutdown goes on serving, answering
// readiness 503 (and gRPC health NOT_SERVING), before it stops taking
// requests: the time a load balancer needs to see the server leave (a
// Kubernetes readiness probe's period times its failure threshold). The
// default is 0.
func WithDrainGrace(d time.Duration) Option { return func(c *config) { c.drainGrace = d } }

// WithBodyTimeout bounds the time a REST request's body takes to arrive,
// from its headers on: a client that stalls is answered 408 and let go.
// The default is 30s.
func WithBodyTimeout(d time.Duration) Option { return func(c *config) { c.bodyTimeout = d } }

// WithTLS serves both listeners over TLS with cfg: its certificates, and
// for mutual TLS its ClientCAs and ClientAuth. The server adds the ALPN
// protocols HTTP/2 and gRPC need.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithServerVersion sets the name and version the server metadata reports.
func WithServerVersion(name, version string) Option {
	return func(c *config) { c.name, c.version = name, version }
}

// WithAPIKeys makes every endpoint of every protocol — REST and gRPC,
// inference, metadata, the repository, /metrics — take only requests that
// bear one of the keys (Authorization: Bearer KEY, as HTTP header or gRPC
// metadata), compared in constant time; the liveness and readiness
// probes (REST's /v2/health/*, gRPC's health service) answer without one.
// A refusal is 401 (UNAUTHENTICATED) in the protocol's error shape,
// counted in drainpipe_auth_failures_total and never logged with what
// was sent. The default takes every request.
func WithAPIKeys(keys ...string) Option {
	return func(c *config) {
		for _, k := range keys {
			c.apiKeys = append(c.apiKeys, []byte(k))
		}
	}
}

// WithAPIKeyFile is WithAPIKeys with the keys of a file, a key a line,
// read again when the file changes (looked at once a second at most), so
// keys rotate without a restart. The file must hold a key when the server
// is made; a later version that cannot be read or holds none leaves the
// keys read before in force.
func WithAPIKeyFile(path string) Option { return func(c *config) { c.apiKeyFile = path } }

// WithMetricsPublic serves /metrics without the API key (a scraper that
// carries none). The default asks for it when the server has keys.
func WithMetricsPublic(on bool) Option { return func(c *config) { c.metricsPublic = on } }
