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
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

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

const width = 64

// call sends one request and waits for its answer.
type call func(ctx context.Context) error

// result is what one run measured.
type result struct {
	requests, errors int
	elapsed          time.Duration
	p50, p99         time.Duration
}

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

	srv, err := serve.New([]serve.ModelSpec{{Name: "mlp", Model: model, Input: schema, Options: opts, Batching: batching}})
	check(err)
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, httpLn, grpcLn) }()
	<-srv.Ready()
	conn, err := grpc.NewClient(grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	client := pb.NewGRPCInferenceServiceClient(conn)
	// A bounded pool, as a real client keeps: an open loop that opened a
	// connection per waiting request would run out of ports.
	httpClient := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * *callers, MaxIdleConnsPerHost: 4 * *callers}}
	url := "http://" + httpLn.Addr().String() + "/v2/models/mlp/infer"
	bareURL, bareAddr, stopBare := startBare()
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
		data := features(rows)
		calls := map[string]call{
			"in-process":  inProcess(bt, schema, data, rows),
			"http":        restCall(httpClient, url, data, rows),
			"http-binary": restBinaryCall(httpClient, url, data, rows),
			"grpc":        grpcCall(client, data, rows),
		}
		ref := closedLoop(calls["in-process"], *callers, *duration)
		report(out, "saturation", "in-process", rows, 0, 0, ref, ref)
		for _, proto := range []string{"http", "http-binary", "grpc"} {
			sat := closedLoop(calls[proto], *callers, *duration)
			report(out, "saturation", proto, rows, 0, 0, sat, ref)
			bare := closedLoop(map[string]call{
				"http":        restCall(httpClient, bareURL, data, rows),
				"http-binary": restBinaryCall(httpClient, bareURL, data, rows),
				"grpc":        grpcCall(bareClient, data, rows),
			}[proto], *callers, *duration)
			report(out, "saturation", "bare "+proto, rows, 0, 0, bare, ref)
			rate := func(r result) float64 { return float64(r.requests) / r.elapsed.Seconds() }
			floors = append(floors, fmt.Sprintf("%s, %d rows: drainpipe ÷ a bare server of the same stack %.3f (%.0f against %.0f req/s)",
				proto, rows, rate(sat)/rate(bare), rate(sat), rate(bare)))
			for _, load := range loads {
				rate := load * float64(sat.requests) / sat.elapsed.Seconds()
				if rate == 0 {
					continue
				}
				report(out, "open loop", proto, rows, load, rate, openLoop(calls[proto], rate, *duration), ref)
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
	stop()
	check(<-done)
	check(bt.Close(context.Background()))
}

// features returns rows×width feature values.
func features(rows int) []float32 {
	data := make([]float32, rows*width)
	for i := range data {
		data[i] = float32(i%113)/56 - 1
	}
	return data
}

func inProcess(bt *online.Batcher, schema *arrow.Schema, data []float32, rows int) call {
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

func restCall(client *http.Client, url string, data []float32, rows int) call {
	body, err := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{rows, width}, "data": data}}})
	check(err)
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// restBinaryCall sends the rows as Triton's binary tensor data extension
// does (the JSON header, then the floats as little-endian bytes) and asks
// for the outputs in binary.
func restBinaryCall(client *http.Client, url string, data []float32, rows int) call {
	head, err := json.Marshal(map[string]any{
		"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{rows, width},
			"parameters": map[string]any{"binary_data_size": len(data) * 4}}},
		"parameters": map[string]any{"binary_data_output": true}})
	check(err)
	body := append(head, rawFloats(data)...)
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set(serve.BinaryHeader, fmt.Sprint(len(head)))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get(serve.BinaryHeader) == "" {
			return fmt.Errorf("status %d, %s %q", resp.StatusCode, serve.BinaryHeader, resp.Header.Get(serve.BinaryHeader))
		}
		return nil
	}
}

// rawFloats returns data as little-endian bytes.
func rawFloats(data []float32) []byte {
	raw := make([]byte, 0, len(data)*4)
	for _, v := range data {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	return raw
}

func grpcCall(client pb.GRPCInferenceServiceClient, data []float32, rows int) call {
	raw := rawFloats(data)
	req := &pb.ModelInferRequest{ModelName: "mlp",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{int64(rows), width}}},
		RawInputContents: [][]byte{raw}}
	return func(ctx context.Context) error {
		_, err := client.ModelInfer(ctx, req)
		return err
	}
}

// closedLoop runs callers that each send a request and wait for its answer,
// for the duration.
func closedLoop(c call, callers int, d time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var firstErr sync.Once
	began := time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				t := time.Now()
				if err := c(context.Background()); err != nil {
					errs.Add(1)
					firstErr.Do(func() { log.Printf("closed loop: %v", err) })
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return summarize(lat, int(errs.Load()), time.Since(began))
}

// openLoop sends requests at Poisson arrivals of the rate, each in its own
// goroutine, and measures latency from each request's scheduled arrival.
func openLoop(c call, rate float64, d time.Duration) result {
	n := max(int(rate*d.Seconds()), 1)
	rng := rand.New(rand.NewPCG(9, uint64(rate)))
	arrivals := make([]time.Duration, n)
	t := time.Duration(0)
	for i := range arrivals {
		t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		arrivals[i] = t
	}
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var firstErr sync.Once
	began := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		if w := arrivals[i] - time.Since(began); w > 100*time.Microsecond {
			time.Sleep(w)
		}
		wg.Go(func() {
			if err := c(context.Background()); err != nil {
				errs.Add(1)
				firstErr.Do(func() { log.Printf("open loop: %v", err) })
			}
			lat[i] = time.Since(began) - arrivals[i]
		})
	}
	wg.Wait()
	return summarize(lat, int(errs.Load()), time.Since(began))
}

func summarize(lat []time.Duration, errs int, elapsed time.Duration) result {
	r := result{requests: len(lat), errors: errs, elapsed: elapsed}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

func report(w io.Writer, run, proto string, rows int, load, offered float64, r, ref result) {
	reqs := float64(r.requests) / r.elapsed.Seconds()
	refRows := float64(ref.requests*rows) / ref.elapsed.Seconds()
	loadCol, offeredCol := "-", "-"
	if load > 0 {
		loadCol, offeredCol = fmt.Sprintf("%.0f%%", 100*load), fmt.Sprintf("%.0f", offered)
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%.0f\t%.0f\t%.3f\t%s\t%s\t%d\t\n", run, proto, rows, loadCol, offeredCol,
		reqs, reqs*float64(rows), reqs*float64(rows)/refRows,
		r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.errors)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
