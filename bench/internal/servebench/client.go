// Package servebench load-tests a model server on loopback for the
// benchmarks: the clients of each protocol (REST JSON, REST with Triton's
// binary tensors, gRPC with raw contents), closed and open loops, and the
// bare servers of the same stack that are the floor of what a server
// costs.
package servebench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drainpipe/drainpipe/serve"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// Call sends one request and waits for its answer.
type Call func(ctx context.Context) error

// Result is what one run measured.
type Result struct {
	Requests, Errors int
	Elapsed          time.Duration
	P50, P99         time.Duration
}

// Rate is the requests answered a second.
func (r Result) Rate() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Features returns rows×Width feature values.
func Features(rows int) []float32 {
	data := make([]float32, rows*Width)
	for i := range data {
		data[i] = float32(i%113)/56 - 1
	}
	return data
}

// REST sends the rows as JSON.
func REST(client *http.Client, url string, data []float32, rows int) Call {
	body, err := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{rows, Width}, "data": data}}})
	if err != nil {
		panic(err) // a map of plain values
	}
	return func(ctx context.Context) error {
		_, err := post(ctx, client, url, body, nil)
		return err
	}
}

// RESTBinary sends the rows as Triton's binary tensor data extension
// does (the JSON header, then the floats as little-endian bytes) and asks
// for the outputs in binary.
func RESTBinary(client *http.Client, url string, data []float32, rows int) Call {
	head, err := json.Marshal(map[string]any{
		"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{rows, Width},
			"parameters": map[string]any{"binary_data_size": len(data) * 4}}},
		"parameters": map[string]any{"binary_data_output": true}})
	if err != nil {
		panic(err) // a map of plain values
	}
	body := append(head, RawFloats(data)...)
	header := http.Header{serve.BinaryHeader: {fmt.Sprint(len(head))}}
	return func(ctx context.Context) error {
		h, err := post(ctx, client, url, body, header)
		if err == nil && h.Get(serve.BinaryHeader) == "" {
			err = fmt.Errorf("no %s in the answer", serve.BinaryHeader)
		}
		return err
	}
}

// post sends body with header and reads the answer through, which must be
// 200 OK; it returns the answer's header.
func post(ctx context.Context, client *http.Client, url string, body []byte, header http.Header) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header, nil
}

// RawFloats returns data as little-endian bytes.
func RawFloats(data []float32) []byte {
	raw := make([]byte, 0, len(data)*4)
	for _, v := range data {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	return raw
}

// GRPC sends the rows as raw contents.
func GRPC(client pb.GRPCInferenceServiceClient, data []float32, rows int) Call {
	raw := RawFloats(data)
	req := &pb.ModelInferRequest{ModelName: "mlp",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{int64(rows), Width}}},
		RawInputContents: [][]byte{raw}}
	return func(ctx context.Context) error {
		_, err := client.ModelInfer(ctx, req)
		return err
	}
}

// ClosedLoop runs callers that each send a request and wait for its answer,
// for the duration.
func ClosedLoop(c Call, callers int, d time.Duration) Result {
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

// OpenLoop sends requests at Poisson arrivals of the rate, each in its own
// goroutine, and measures latency from each request's scheduled arrival.
func OpenLoop(c Call, rate float64, d time.Duration) Result {
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

func summarize(lat []time.Duration, errs int, elapsed time.Duration) Result {
	r := Result{Requests: len(lat), Errors: errs, Elapsed: elapsed}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

// Serve runs a model server of spec on loopback (REST and gRPC on free
// ports) until stop, which returns the server's error.
func Serve(spec serve.ModelSpec, opts ...serve.Option) (restURL, grpcAddr string, stop func() error, err error) {
	srv, err := serve.New([]serve.ModelSpec{spec}, opts...)
	if err != nil {
		return "", "", nil, err
	}
	httpLn, grpcLn, err := listenTwo()
	if err != nil {
		return "", "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, httpLn, grpcLn) }()
	<-srv.Ready()
	return "http://" + httpLn.Addr().String() + "/v2/models/" + spec.Name + "/infer", grpcLn.Addr().String(), func() error {
		cancel()
		return <-done
	}, nil
}

// listenTwo listens on two free loopback ports, for a server's REST and
// gRPC sides.
func listenTwo() (httpLn, grpcLn net.Listener, err error) {
	httpLn, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	grpcLn, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		httpLn.Close()
		return nil, nil, err
	}
	return httpLn, grpcLn, nil
}
