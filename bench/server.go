package main

import (
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drainpipe/drainpipe/bench/internal/servebench"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	"github.com/drainpipe/drainpipe/tensor"
)

// servers are drainpipe's model server and the bare servers of the same
// stack (bench/internal/servebench), on loopback, with a client of each
// protocol: the two sides of the server goals.
type servers struct {
	http           *http.Client
	url, bareURL   string
	grpc, bareGRPC pb.GRPCInferenceServiceClient
	conns          []*grpc.ClientConn
	stop           func() error
	stopBare       func()
	duration       time.Duration
}

// startServers serves m as `drainpipe serve` does on this machine: a
// session group a core, allowed sizes 1, 2, 4 … batch, a 2 ms delay.
func startServers(m device.Model, batch int, d time.Duration) *servers {
	var sizes []int
	for n := 1; n < batch; n *= 2 {
		sizes = append(sizes, n)
	}
	opts := []predict.Option{predict.WithBatchSizes(append(sizes, batch)...), predict.WithGroups(runtime.GOMAXPROCS(0))}
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: tensor.Type(width)}}, nil)
	url, grpcAddr, stop, err := servebench.Serve(serve.ModelSpec{Name: "mlp", Model: m, Input: schema, Options: opts,
		Batching: online.Options{MaxDelay: 2 * time.Millisecond, QueueRows: 1 << 20}})
	check(err)
	s := &servers{stop: stop, duration: d, url: url,
		http: &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * onlineCallers, MaxIdleConnsPerHost: 4 * onlineCallers}}}
	var bareAddr string
	s.bareURL, bareAddr, s.stopBare, err = servebench.StartBare()
	check(err)
	s.grpc, s.bareGRPC = s.client(grpcAddr), s.client(bareAddr)
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

func (s *servers) close() {
	for _, c := range s.conns {
		c.Close()
	}
	s.http.CloseIdleConnections()
	s.stopBare()
	check(s.stop())
}
