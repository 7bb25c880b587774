package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve"
	"github.com/drainpipe/drainpipe/storage"
	"github.com/drainpipe/drainpipe/tensor"
)

const serveLong = `Serves models over the Open Inference Protocol (KServe V2, Triton), REST
and gRPC, every request through the model's online batcher.
`

const serveExample = `
Each model's input is a tensor named after its feature column, of shape
[rows, width] and datatype FP32; its outputs are "class" (INT64, [rows]) and
"probabilities" (FP32, [rows, classes]); GET /v2/models/NAME lists them. For
example, with the demo's model (64 features, 10 classes):

  drainpipe serve --model drainpipe-demo/model.dpmlp
  curl -s localhost:8080/v2/models/model/infer -H 'Request-Timeout: 250ms' -d '{
    "id": "1",
    "inputs": [{"name": "features", "datatype": "FP32", "shape": [1, 64],
                "data": ['"$(seq -s, 0.01 0.01 0.64)"']}]
  }'

Prometheus metrics are at GET /metrics on the REST address, Triton's
statistics at GET /v2/models/NAME/stats.

With --api-key-file every route and gRPC method asks for one of the
file's keys (Authorization: Bearer KEY, a header or gRPC metadata) but the
probes (/v2/health/live, /v2/health/ready, grpc.health.v1), and /metrics
with --metrics-public. Rewrite the file to rotate the keys: the server
reads it again within a second, without a restart.

A model repository (--model-repository) is a folder in Triton's layout,
NAME/VERSION/model.dpmlp (or model.onnx) with an optional NAME/config.json
({"version_policy": {"latest": 2}, "batch_sizes": [1, 8], "max_delay":
"2ms"}). With --repository-poll the folder decides what is served;
without it, POST /v2/repository/models/NAME/load and .../unload do. A new
version takes traffic once warmed up, and the old one finishes its
requests before it shuts down.

gRPC clients use inference.GRPCInferenceService on --grpc, which also
answers grpc.health.v1 (service "" and each model's name) and server
reflection (grpcurl). SIGTERM or SIGINT drains: readiness turns 503 and
gRPC health NOT_SERVING while the server goes on serving for
--drain-grace, then it stops taking requests, answers the ones it has
and shuts the sessions down; the exit status is 0 if that took less than
--drain-timeout.
`

// serveCmd serves models over the Open Inference Protocol until a signal.
func serveCommand() *cobra.Command {
	c := &cobra.Command{Use: "serve --model [NAME=]PATH | --model-repository DIR", Short: "Serve models over the Open Inference Protocol (KServe V2, Triton), REST and gRPC", Long: serveLong, Example: serveExample, Args: noArgs("--model")}
	fs := c.Flags()
	var models, sizes listFlag
	fs.Var(&models, "model", "a model to serve, as PATH or NAME=PATH (default name: the file's base name); repeatable")
	repoDir := fs.String("model-repository", "", "serve the models of this folder (or object storage prefix, s3://bucket/models/?…, polled by listing), in Triton's layout: NAME/VERSION/model.dpmlp (or model.onnx), with an optional NAME/config.pbtxt and NAME/config.json")
	repoPoll := fs.Duration("repository-poll", 0, "rescan --model-repository this often, loading new versions and unloading removed ones (0: load at start, then only through the repository API)")
	name := fs.String("name", "", "the name of the one model served (instead of NAME=PATH)")
	httpAddr := fs.String("http", ":8080", `REST listen address ("" for none)`)
	grpcAddr := fs.String("grpc", ":8081", `gRPC listen address ("" for none)`)
	featureCol := fs.String("feature-column", "", "the tensor column (and input tensor name) the models read (default: the model's, or \"features\")")
	var chunks chunkFlags
	fs.StringVar(&chunks.pool, "chunk-pool", "", "embedding models: embed a text longer than the model keeps as its overlapping windows, pooled into one embedding (mean: weighted by each window's tokens, then unit length if the folder normalizes), on /v1/embeddings and /embed, where it would be cut")
	fs.IntVar(&chunks.overlap, "chunk-overlap", 0, "with --chunk-pool: the tokens each window shares with the one before")
	fs.IntVar(&chunks.max, "max-chunks", 256, "with --chunk-pool: the most windows a text may make; a longer text is refused, naming the bound")
	fs.Bool("tokenize", false, "")
	fs.MarkDeprecated("tokenize", "a model folder with a tokenizer.json takes text without it")
	batch := fs.Int("batch-size", 256, "the largest batch the device sees")
	fs.Var(&sizes, "batch-sizes", "allowed batch sizes, ascending, the last the batch size (default: powers of two from 1 up to --batch-size)")
	maxDelay := fs.Duration("max-delay", 2*time.Millisecond, "the longest a queued row waits for its batch to fill")
	queueRows := fs.Int("queue-rows", 0, "rows a model may hold queued before refusing requests with 429 (0: 16 batches)")
	timeout := fs.Duration("timeout", 10*time.Second, "default request deadline, when the request sets none sooner (0: none)")
	replicas := fs.Int("replicas", 1, "sessions that split each batch between them")
	sessions := fs.Int("sessions", 0, sessionsHelp)
	drainTimeout := fs.Duration("drain-timeout", 30*time.Second, "the longest a graceful shutdown waits for requests taken")
	drainGrace := fs.Duration("drain-grace", 0, "on SIGTERM, go on serving this long with readiness 503 (and gRPC health NOT_SERVING), so load balancers take the server out first; set it to the readiness probe's period times its failure threshold")
	bodyTimeout := fs.Duration("body-timeout", 30*time.Second, "the longest a REST request's body may take to arrive (408 after)")
	exitOnError := fs.Bool("exit-on-error", true, "exit at start if a repository model fails to load (false: serve the others; readiness stays 503 while a model serves nothing)")
	maxConns := fs.Int("max-connections", 0, "connections each listener holds open at once (0: 4096, or a third of the file descriptor limit if less)")
	tlsCert := fs.String("tls-cert", "", "serve both listeners over TLS with this certificate (PEM; with --tls-key)")
	tlsKey := fs.String("tls-key", "", "the private key of --tls-cert (PEM)")
	tlsClientCA := fs.String("tls-client-ca", "", "require client certificates signed by these CAs (PEM): mutual TLS")
	maxBytes := cliflag.Bytes(64 << 20)
	fs.Var(&maxBytes, "max-request-bytes", "the largest request body (REST) or message (gRPC), such as 64MiB")
	var maxInflight cliflag.Bytes
	fs.Var(&maxInflight, "max-inflight-bytes", "the request bytes all requests may hold at once, such as 2GiB; past it a request is refused at once, 429 with Retry-After (default: half of GOMEMLIMIT if set, else 1GiB, and at least --max-request-bytes)")
	logJSON := fs.Bool("log-json", false, "log JSON lines instead of text")
	apiKeyFile := fs.String("api-key-file", "", "take requests on every route and gRPC method, but the health probes, only with one of this `file`'s keys (a line each) as a bearer token; the file is read again when it changes")
	metricsPublic := fs.Bool("metrics-public", false, "serve /metrics without the key of --api-key-file")
	accessLog := fs.Bool("access-log", false, "log a line a request (off by default: it costs a busy server CPU; /metrics counts every request)")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stderr := c.Context(), c.ErrOrStderr()
		if len(models) == 0 && *repoDir == "" {
			return usageError(errors.New("serve: --model or --model-repository is required"))
		}
		if len(models) > 0 && *repoDir != "" {
			return usageError(errors.New("serve: --model and --model-repository together: serve a folder's models, or the ones named, not both (put the model in the repository)"))
		}
		if *repoPoll != 0 && *repoDir == "" {
			return usageError(errors.New("serve: --repository-poll polls --model-repository, which is not given"))
		}
		if *name != "" && len(models) > 1 {
			return errors.New("serve: --name names the one model served; with several, give NAME=PATH")
		}
		if *httpAddr == "" && *grpcAddr == "" {
			return errors.New("serve: neither --http nor --grpc: nothing to listen on")
		}
		if err := chunks.check(fs); err != nil {
			return err
		}
		allowed, err := batchSizes(sizes, *batch)
		if err != nil {
			return err
		}
		if fs.Changed("batch-size") && len(sizes) > 0 && allowed[len(allowed)-1] != *batch {
			return usageError(fmt.Errorf("serve: --batch-size %d and --batch-sizes %s disagree: the last batch size is the batch size", *batch, strings.Join(sizes, ",")))
		}
		tlsConfig, err := serveTLS(*tlsCert, *tlsKey, *tlsClientCA)
		if err != nil {
			return err
		}
		var handler slog.Handler = slog.NewTextHandler(stderr, nil)
		if *logJSON {
			handler = slog.NewJSONHandler(stderr, nil)
		}
		logger := slog.New(handler)

		// spec makes the spec of a model file, with the flags' batching.
		spec := func(path string, pin storage.Info) (serve.ModelSpec, error) {
			sq := defaultSequenceFlags()
			sq.warmUp, sq.servesText = true, true
			m, err := loadModelAt(path, pin, *featureCol, sq)
			if err != nil {
				return serve.ModelSpec{}, err
			}
			platform := "drainpipe_mlp"
			if strings.EqualFold(filepath.Ext(path), ".onnx") {
				platform = "onnxruntime_onnx"
			}
			sp := serve.ModelSpec{
				Platform: platform, Model: m.model,
				Options: []predict.Option{predict.WithBatchSizes(allowed...), predict.WithReplicas(*replicas),
					predict.WithGroups(cmp.Or(*sessions, m.sessions))},
				Batching: online.Options{MaxDelay: cmp.Or(*maxDelay, online.NoDelay), QueueRows: *queueRows, Timeout: *timeout},
			}
			if m.seq != nil {
				// Token ids, int64 [rows, tokens] a request (with an
				// attention_mask for rows of other lengths); the batch is
				// the window.
				sp.Platform, sp.Sequence = "onnxruntime_onnx", m.seq
				fields := []arrow.Field{{Name: m.feature, Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}
				if m.textPair != "" {
					fields = append(fields, arrow.Field{Name: pairTypeIDs, Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)})
				}
				sp.Input = arrow.NewSchema(fields, nil)
				if m.tok != nil {
					// The folder's tokenizer: requests may send text,
					// encoded once by the server into the token inputs.
					if sp.Text, err = textModel(m, int(m.maxTextBytes), chunks); err != nil {
						return serve.ModelSpec{}, err
					}
				}
			} else {
				sp.Input = arrow.NewSchema([]arrow.Field{{Name: cmp.Or(m.feature, "features"), Type: tensor.Type(m.inputSize)}}, nil)
			}
			return sp, nil
		}
		var specs []serve.ModelSpec
		for _, arg := range models {
			// NAME=PATH; a URL's query holds = signs of its own.
			modelName, path, found := strings.Cut(arg, "=")
			if !found || strings.ContainsAny(modelName, "/:?") {
				path = arg
				base := path
				if storage.IsURL(path) {
					base, _, _ = strings.Cut(path, "?")
				}
				modelName = cmp.Or(*name, strings.TrimSuffix(filepath.Base(base), filepath.Ext(base)))
			}
			sp, err := spec(path, storage.Info{})
			if err != nil {
				return err
			}
			sp.Name = modelName
			specs = append(specs, sp)
		}
		opts := []serve.Option{serve.WithLogger(logger), serve.WithAccessLog(*accessLog), serve.WithDrainTimeout(*drainTimeout), serve.WithDrainGrace(*drainGrace),
			serve.WithBodyTimeout(*bodyTimeout), serve.WithMaxConnections(*maxConns), serve.WithExitOnError(*exitOnError), serve.WithMaxRequestBytes(int64(maxBytes)), serve.WithMaxInflightBytes(int64(maxInflight)), serve.WithServerVersion("drainpipe", buildVersion())}
		if tlsConfig != nil {
			opts = append(opts, serve.WithTLS(tlsConfig))
		}
		if *apiKeyFile != "" {
			opts = append(opts, serve.WithAPIKeyFile(*apiKeyFile), serve.WithMetricsPublic(*metricsPublic))
		}
		if *repoDir != "" {
			if st, err := os.Stat(*repoDir); !storage.IsURL(*repoDir) && (err != nil || !st.IsDir()) {
				return fmt.Errorf("serve: --model-repository %s: not a folder", *repoDir)
			}
			opts = append(opts, serve.WithRepository(serve.Repository{Dir: *repoDir, Poll: *repoPoll,
				Load:       func(_ context.Context, path string) (serve.ModelSpec, error) { return spec(path, storage.Info{}) },
				LoadPinned: func(_ context.Context, path string, v storage.Info) (serve.ModelSpec, error) { return spec(path, v) }}))
		}
		tp, stopTraces, err := traces(ctx, logger)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer stopTraces()
		if tp != nil {
			opts = append(opts, serve.WithTracerProvider(tp))
		}
		srv, err := serve.New(specs, opts...)
		if err != nil {
			return err
		}
		listen := func(addr string) (net.Listener, error) {
			if addr == "" {
				return nil, nil
			}
			var lc net.ListenConfig
			return lc.Listen(ctx, "tcp", addr)
		}
		httpLn, err := listen(*httpAddr)
		if err != nil {
			return fmt.Errorf("serve: --http: %w", err)
		}
		grpcLn, err := listen(*grpcAddr)
		if err != nil {
			if httpLn != nil {
				httpLn.Close()
			}
			return fmt.Errorf("serve: --grpc: %w", err)
		}
		return srv.Run(ctx, httpLn, grpcLn)
	}
	return c
}

// serveTLS returns the TLS configuration the flags ask for, or nil.
func serveTLS(cert, key, clientCA string) (*tls.Config, error) {
	switch {
	case cert == "" && key == "" && clientCA == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, usageError(errors.New("serve: --tls-cert and --tls-key go together"))
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("serve: --tls-cert, --tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("serve: --tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("serve: --tls-client-ca %s: no PEM certificate in it", clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// batchSizes returns the allowed batch sizes: the given ones, or powers of
// two from 1 up to the batch size: an idle session takes a lone request at
// once, and a busy server fills larger batches.
func batchSizes(given []string, batch int) ([]int, error) {
	if batch < 1 {
		return nil, fmt.Errorf("serve: --batch-size %d: must be positive", batch)
	}
	var sizes []int
	for _, s := range given {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("serve: --batch-sizes: %q is not a number", s)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) > 0 {
		return sizes, nil
	}
	for n := 1; n < batch; n *= 2 {
		sizes = append(sizes, n)
	}
	return append(sizes, batch), nil
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}
