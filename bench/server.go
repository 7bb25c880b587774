package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drainpipe/drainpipe/bench/internal/servebench"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	"github.com/drainpipe/drainpipe/tensor"
)

// servers are drainpipe's model server and the bare servers of the same
// stack (bench/internal/servebench), on loopback, with a client of each
// protocol: the two sides of the server goals.
type servers struct {
	http               *http.Client
	url, bareURL       string
	grpcAddr, bareAddr string
	grpc, bareGRPC     pb.GRPCInferenceServiceClient
	conns              []*grpc.ClientConn
	stop               func() error
	stopBare           func()
	duration           time.Duration

	// The bare servers that run the model on each request as it comes,
	// and their model sessions.
	modelURL, modelAddr string
	modelGRPC           pb.GRPCInferenceServiceClient
	stopModel           func()
	sessions            chan *requestSession

	// For the model's share of the server's CPU: the model, its
	// session config, and its CPU a batch, by batch size, as measured.
	model    device.Model
	config   device.SessionConfig
	batchCPU map[int]time.Duration
}

// startServers serves m as `drainpipe serve` does on this machine: a
// session group a core, allowed sizes 1, 2, 4 … batch, a 2 ms delay.
func startServers(m device.Model, batch int, d time.Duration) *servers {
	var sizes []int
	for n := 1; n < batch; n *= 2 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, batch)
	opts := []predict.Option{predict.WithBatchSizes(sizes...), predict.WithGroups(runtime.GOMAXPROCS(0))}
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: tensor.Type(width)}}, nil)
	url, grpcAddr, stop, err := servebench.Serve(serve.ModelSpec{Name: "mlp", Model: m, Input: schema, Options: opts,
		Batching: online.Options{MaxDelay: 2 * time.Millisecond, QueueRows: 1 << 20}})
	check(err)
	s := &servers{stop: stop, duration: d, url: url, grpcAddr: grpcAddr,
		http:  &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * onlineCallers, MaxIdleConnsPerHost: 4 * onlineCallers}},
		model: m, batchCPU: map[int]time.Duration{}}
	padded, err := pad.Schema(schema)
	check(err)
	s.config = device.SessionConfig{BatchSize: batch, BatchSizes: sizes, Replicas: 1, Sessions: runtime.GOMAXPROCS(0), Schema: padded, Allocator: memory.DefaultAllocator}
	s.bareURL, s.bareAddr, s.stopBare, err = servebench.StartBare(nil)
	check(err)
	s.sessions = make(chan *requestSession, runtime.GOMAXPROCS(0))
	for range cap(s.sessions) {
		s.sessions <- s.newRequestSession()
	}
	s.modelURL, s.modelAddr, s.stopModel, err = servebench.StartBare(s.runRequest)
	check(err)
	s.grpc, s.bareGRPC, s.modelGRPC = s.client(grpcAddr), s.client(s.bareAddr), s.client(s.modelAddr)
	return s
}

// requestSession is a model session of the bare model server, with the
// padder that makes its batches: one a core, as a Go user would keep them.
type requestSession struct {
	sess   device.Session
	padder *pad.Padder
	schema *arrow.Schema
}

func (s *servers) newRequestSession() *requestSession {
	sess, err := s.model.Start(context.Background(), s.config)
	check(err)
	schema := arrow.NewSchema([]arrow.Field{s.config.Schema.Field(0)}, nil)
	padder, err := pad.New(memory.DefaultAllocator, schema, s.config.BatchSize)
	check(err)
	return &requestSession{sess: sess, padder: padder, schema: schema}
}

// runRequest runs the model on one request's rows, on a free session,
// in a batch of exactly those rows (the sizes allowed are 1, 2, 4 …).
func (s *servers) runRequest(ctx context.Context, rows int, features []float32) ([]int64, []float32, error) {
	rs := <-s.sessions
	defer func() { s.sessions <- rs }()
	col := tensor.NewFixedSizeList(memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(features)), rows, width)
	defer col.Release()
	rec := array.NewRecordBatch(rs.schema, []arrow.Array{col}, int64(rows))
	defer rec.Release()
	batch, _, err := rs.padder.PadTo(rec, rows)
	if err != nil {
		return nil, nil, err
	}
	defer batch.Release()
	out, err := rs.sess.Predict(ctx, device.Batch{Record: batch})
	if err != nil {
		return nil, nil, err
	}
	defer out.Release()
	var class []int64
	var probs []float32
	for i, f := range out.Schema().Fields() {
		switch f.Name {
		case "class":
			class = slices.Clone(out.Column(i).(*array.Int64).Int64Values()[:rows])
		case "probabilities":
			l := out.Column(i).(*array.FixedSizeList)
			probs = slices.Clone(l.ListValues().(*array.Float32).Float32Values()[l.Offset()*servebench.Classes:][:rows*servebench.Classes])
		}
	}
	if class == nil || probs == nil {
		return nil, nil, fmt.Errorf("the model's outputs %v lack class or probabilities", out.Schema())
	}
	return class, probs, nil
}

func (s *servers) client(addr string) pb.GRPCInferenceServiceClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	s.conns = append(s.conns, conn)
	return pb.NewGRPCInferenceServiceClient(conn)
}

// bareRatio runs 64 closed-loop callers against the fixed-answer bare
// server and the one running the model, in the round's order, and
// returns the ratio of their request rates.
func (s *servers) bareRatio(r int, proto string, rows int) float64 {
	data := servebench.Features(rows)
	fixed, model := servebench.GRPC(s.bareGRPC, data, rows), servebench.GRPC(s.modelGRPC, data, rows)
	if proto == "REST" {
		fixed, model = servebench.REST(s.http, s.bareURL, data, rows), servebench.REST(s.http, s.modelURL, data, rows)
	}
	return s.rates(r, fixed, model)
}

// rates runs 64 closed-loop callers of a and of b, in the round's order,
// and returns the ratio of their request rates.
func (s *servers) rates(r int, a, b servebench.Call) float64 {
	var ra, rb servebench.Result
	pair(r, func() float64 { ra = servebench.ClosedLoop(a, onlineCallers, s.duration); return 0 },
		func() float64 { rb = servebench.ClosedLoop(b, onlineCallers, s.duration); return 0 })
	if ra.Errors > 0 || rb.Errors > 0 {
		check(fmt.Errorf("server goal: %d and %d requests failed", ra.Errors, rb.Errors))
	}
	return ra.Rate() / rb.Rate()
}

// ratio runs 64 closed-loop callers against drainpipe's server and a
// bare one (withModel: the one that runs the model on each request), in
// the round's order, and returns the ratio of their request rates.
func (s *servers) ratio(r int, proto string, rows int, withModel bool) float64 {
	data := servebench.Features(rows)
	bareGRPC, bareURL := s.bareGRPC, s.bareURL
	if withModel {
		bareGRPC, bareURL = s.modelGRPC, s.modelURL
	}
	ours, bare := servebench.GRPC(s.grpc, data, rows), servebench.GRPC(bareGRPC, data, rows)
	if proto == "REST" {
		ours, bare = servebench.REST(s.http, s.url, data, rows), servebench.REST(s.http, bareURL, data, rows)
	}
	return s.rates(r, ours, bare)
}

// cpuAbove runs the callers in a process of their own against
// drainpipe's server and against the bare one, in the round's order, and
// returns the server's CPU a request above the bare server's and the
// model's share, in µs. The model's share is what the batches the server
// ran cost the model alone: their count by size from the server's
// statistics, times the model's CPU a batch of each size.
func (s *servers) cpuAbove(r int, proto string, rows int) float64 {
	ours, bare := s.grpcAddr, s.bareAddr
	if proto == "REST" {
		ours, bare = s.url, s.bareURL
	}
	var oursCPU, bareCPU, model float64 // seconds a request
	pair(r, func() float64 {
		before := s.batches()
		oursCPU = s.cpuPerRequest(proto, ours, rows)
		after := s.batches()
		var cpu time.Duration
		for size, n := range after.bySize {
			cpu += time.Duration(n-before.bySize[size]) * s.modelCPU(size)
		}
		model = cpu.Seconds() / float64(after.requests-before.requests)
		return 0
	}, func() float64 { bareCPU = s.cpuPerRequest(proto, bare, rows); return 0 })
	return (oursCPU - bareCPU - model) * 1e6
}

// cpuPerRequest returns this process's CPU a request while the callers,
// in a process of their own, call target.
func (s *servers) cpuPerRequest(proto, target string, rows int) float64 {
	began, err := servebench.CPUTime()
	check(err)
	res, err := servebench.Clients{Protocol: proto, Target: target, Rows: rows, Callers: onlineCallers, Duration: s.duration}.Run()
	check(err)
	ended, err := servebench.CPUTime()
	check(err)
	if res.Errors > 0 || res.Requests == 0 {
		check(fmt.Errorf("server CPU goal %s, %d rows, %s: %d requests answered, %d failed", proto, rows, target, res.Requests, res.Errors))
	}
	return (ended - began).Seconds() / float64(res.Requests)
}

// served is what the server's statistics count: requests answered, and
// batches run by padded size.
type served struct {
	requests int64
	bySize   map[int]int64
}

// batches reads the served model's statistics (the statistics extension).
func (s *servers) batches() served {
	resp, err := s.http.Get(strings.TrimSuffix(s.url, "/infer") + "/stats")
	check(err)
	defer resp.Body.Close()
	var doc struct {
		ModelStats []struct {
			InferenceStats struct {
				Success struct {
					Count int64 `json:"count"`
				} `json:"success"`
			} `json:"inference_stats"`
			BatchStats []struct {
				BatchSize    int `json:"batch_size"`
				ComputeInfer struct {
					Count int64 `json:"count"`
				} `json:"compute_infer"`
			} `json:"batch_stats"`
		} `json:"model_stats"`
	}
	check(json.NewDecoder(resp.Body).Decode(&doc))
	if len(doc.ModelStats) != 1 {
		check(fmt.Errorf("statistics of %d models, want 1", len(doc.ModelStats)))
	}
	st := doc.ModelStats[0]
	out := served{requests: st.InferenceStats.Success.Count, bySize: map[int]int64{}}
	for _, b := range st.BatchStats {
		out.bySize[b.BatchSize] = b.ComputeInfer.Count
	}
	return out
}

// modelCPU returns the model's CPU a padded batch of size rows, run alone
// on a session of its own, measured once a size.
func (s *servers) modelCPU(size int) time.Duration {
	if cpu, ok := s.batchCPU[size]; ok {
		return cpu
	}
	ctx := context.Background()
	sess, err := s.model.Start(ctx, s.config)
	check(err)
	defer func() { check(sess.Shutdown(ctx)) }()
	data := servebench.Features(size)
	col := tensor.NewFixedSizeList(memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(data)), size, width)
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{s.config.Schema.Field(0)}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(size))
	defer rec.Release()
	padder, err := pad.New(memory.DefaultAllocator, schema, s.config.BatchSize)
	check(err)
	defer padder.Release()
	batch, _, err := padder.PadTo(rec, size)
	check(err)
	defer batch.Release()
	runs := 0
	began, err := servebench.CPUTime()
	check(err)
	cpu := time.Duration(0)
	for ; runs < 20 || cpu < 200*time.Millisecond; runs++ {
		out, err := sess.Predict(ctx, device.Batch{Index: runs, Record: batch})
		check(err)
		out.Release()
		now, err := servebench.CPUTime()
		check(err)
		cpu = now - began
	}
	s.batchCPU[size] = cpu / time.Duration(runs)
	return s.batchCPU[size]
}

func (s *servers) close() {
	for _, c := range s.conns {
		c.Close()
	}
	s.http.CloseIdleConnections()
	s.stopBare()
	s.stopModel()
	for range cap(s.sessions) {
		rs := <-s.sessions
		rs.padder.Release()
		check(rs.sess.Shutdown(context.Background()))
	}
	check(s.stop())
}
