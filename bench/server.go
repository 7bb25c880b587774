package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
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
	s.bareURL, s.bareAddr, s.stopBare, err = servebench.StartBare()
	check(err)
	s.grpc, s.bareGRPC = s.client(grpcAddr), s.client(s.bareAddr)
	return s
}

func (s *servers) client(addr string) pb.GRPCInferenceServiceClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	s.conns = append(s.conns, conn)
	return pb.NewGRPCInferenceServiceClient(conn)
}

// ratio runs 64 closed-loop callers against drainpipe's server and the
// bare one, in the round's order, and returns the ratio of their request
// rates.
func (s *servers) ratio(r int, proto string, rows int) float64 {
	data := servebench.Features(rows)
	ours, bare := servebench.GRPC(s.grpc, data, rows), servebench.GRPC(s.bareGRPC, data, rows)
	if proto == "REST" {
		ours, bare = servebench.REST(s.http, s.url, data, rows), servebench.REST(s.http, s.bareURL, data, rows)
	}
	var a, b servebench.Result
	pair(r, func() float64 { a = servebench.ClosedLoop(ours, onlineCallers, s.duration); return 0 },
		func() float64 { b = servebench.ClosedLoop(bare, onlineCallers, s.duration); return 0 })
	if a.Errors > 0 || b.Errors > 0 {
		check(fmt.Errorf("server goal %s, %d rows: %d and %d requests failed", proto, rows, a.Errors, b.Errors))
	}
	return a.Rate() / b.Rate()
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
	check(s.stop())
}
