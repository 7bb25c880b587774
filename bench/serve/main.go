// Command serve load-tests drainpipe's model server on loopback with the
// MLP 64-256-256-10 on the CPU device, all in one run so the figures
// compare:
//
//   - in-process: closed-loop callers sending requests of n rows straight
//     to the model's Batcher (the reference rate);
//
//   - saturation: the same callers as REST (JSON, or Triton's binary
//     tensors) or gRPC (raw contents) clients of the server: rows/s
//     against in-process, p50/p99; and of a bare server of the same stack
//     (bare.go) that decodes the requests and answers a fixed response:
//     the floor of what a server costs;
//
//   - open loop: requests arriving at random (Poisson) at 10%, 50% and 90%
//     of the protocol's saturation rate, each in its own goroutine: p50/p99
//     from each request's scheduled arrival, so a slow server cannot hide
//     its queue.
//
// Clients and server share the machine (and its cores); every run stops by
// itself after --duration and targets only 127.0.0.1.
//
//	go run ./bench/serve                      # the table
//	go run -tags openblas ./bench/serve       # the CPU device on OpenBLAS
//	go run ./bench/serve --duration 300ms     # a quick run
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/drainpipe/drainpipe/bench/internal/servebench"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	"github.com/drainpipe/drainpipe/tensor"
)

const width = servebench.Width

func main() {
	duration := flag.Duration("duration", 2*time.Second, "length of each run")
	callers := flag.Int("callers", 64, "closed-loop callers for the saturation runs")
	sizesFlag := flag.String("rows", "1,32", "rows per request, one set of runs each")
	loadsFlag := flag.String("loads", "0.1,0.5,0.9", "open-loop arrival rates as fractions of the saturation rate (empty: none)")
	sessions := flag.Int("sessions", runtime.GOMAXPROCS(0), "session groups taking whole batches")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (clients and servers) to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}

	model, err := cpu.NewMLP([]int{width, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	check(err)
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: tensor.Type(int(width))}}, nil)
	var sizes []int
	for n := 1; n < 256; n *= 2 {
		sizes = append(sizes, n)
	}
	opts := []predict.Option{predict.WithBatchSizes(append(sizes, 256)...), predict.WithGroups(*sessions)}
	batching := online.Options{MaxDelay: 2 * time.Millisecond, QueueRows: 1 << 20}

	// The in-process reference runs on its own Batcher.
	p, err := predict.New(model, opts...)
	check(err)
	bt, err := online.NewBatcher(context.Background(), p, schema, batching)
	check(err)

	url, grpcAddr, stop, err := servebench.Serve(serve.ModelSpec{Name: "mlp", Model: model, Input: schema, Options: opts, Batching: batching})
	check(err)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	client := pb.NewGRPCInferenceServiceClient(conn)
	// A bounded pool, as a real client keeps: an open loop that opened a
	// connection per waiting request would run out of ports.
	httpClient := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * *callers, MaxIdleConnsPerHost: 4 * *callers}}
	bareURL, bareAddr, stopBare, err := servebench.StartBare(nil)
	check(err)
	bareConn, err := grpc.NewClient(bareAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	bareClient := pb.NewGRPCInferenceServiceClient(bareConn)
	var floors []string // drainpipe ÷ the bare server, a line each

	fmt.Printf("MLP 64-256-256-10 (%s), allowed sizes 1..256, max delay 2ms, %d session group(s), %d closed-loop callers, GOMAXPROCS %d\n\n",
		cpu.BLASName, *sessions, *callers, runtime.GOMAXPROCS(0))
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "run\tprotocol\trows/request\tload\toffered req/s\treq/s\trows/s\t× in-process\tp50\tp99\terrors\t")
	requestRows, err := cliflag.Ints(*sizesFlag)
	check(err)
	loads, err := cliflag.Floats(*loadsFlag)
	check(err)
	for _, rows := range requestRows {
		data := servebench.Features(rows)
		calls := map[string]servebench.Call{
			"in-process":  inProcess(bt, schema, data, rows),
			"http":        servebench.REST(httpClient, url, data, rows),
			"http-binary": servebench.RESTBinary(httpClient, url, data, rows),
			"grpc":        servebench.GRPC(client, data, rows),
		}
		ref := servebench.ClosedLoop(calls["in-process"], *callers, *duration)
		report(out, "saturation", "in-process", rows, 0, 0, ref, ref)
		for _, proto := range []string{"http", "http-binary", "grpc"} {
			sat := servebench.ClosedLoop(calls[proto], *callers, *duration)
			report(out, "saturation", proto, rows, 0, 0, sat, ref)
			bare := servebench.ClosedLoop(map[string]servebench.Call{
				"http":        servebench.REST(httpClient, bareURL, data, rows),
				"http-binary": servebench.RESTBinary(httpClient, bareURL, data, rows),
				"grpc":        servebench.GRPC(bareClient, data, rows),
			}[proto], *callers, *duration)
			report(out, "saturation", "bare "+proto, rows, 0, 0, bare, ref)
			floors = append(floors, fmt.Sprintf("%s, %d rows: drainpipe ÷ a bare server of the same stack %.3f (%.0f against %.0f req/s)",
				proto, rows, sat.Rate()/bare.Rate(), sat.Rate(), bare.Rate()))
			for _, load := range loads {
				rate := load * sat.Rate()
				if rate == 0 {
					continue
				}
				report(out, "open loop", proto, rows, load, rate, servebench.OpenLoop(calls[proto], rate, *duration), ref)
			}
		}
	}
	out.Flush()
	fmt.Println()
	for _, f := range floors {
		fmt.Println(f)
	}
	bareConn.Close()
	stopBare()

	conn.Close()
	httpClient.CloseIdleConnections()
	check(stop())
	check(bt.Close(context.Background()))
}

func inProcess(bt *online.Batcher, schema *arrow.Schema, data []float32, rows int) servebench.Call {
	col := tensor.NewFixedSizeList(memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(data)), rows, width)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(rows))
	return func(ctx context.Context) error {
		out, err := bt.Predict(ctx, rec)
		if err == nil {
			out.Release()
		}
		return err
	}
}

func report(w io.Writer, run, proto string, rows int, load, offered float64, r, ref servebench.Result) {
	reqs := r.Rate()
	refRows := ref.Rate() * float64(rows)
	loadCol, offeredCol := "-", "-"
	if load > 0 {
		loadCol, offeredCol = fmt.Sprintf("%.0f%%", 100*load), fmt.Sprintf("%.0f", offered)
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%.0f\t%.0f\t%.3f\t%s\t%s\t%d\t\n", run, proto, rows, loadCol, offeredCol,
		reqs, reqs*float64(rows), reqs*float64(rows)/refRows,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Errors)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
