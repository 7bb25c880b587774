package servebench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// A server's CPU a request is read from its process's counters, so its
// clients must run in another process: the benchmark program started
// again with clientEnv set, which makes it a load generator (ClientMain).
const clientEnv = "DRAINPIPE_BENCH_CLIENTS"

// Clients is the load a client process runs.
type Clients struct {
	Protocol string        // "gRPC" or "REST"
	Target   string        // the gRPC address or the REST infer URL
	Rows     int           // rows a request
	Callers  int           // closed-loop callers
	Duration time.Duration // how long they call
}

// Run runs the clients in a process of their own, this program started
// again, and returns what they measured. The program must call
// [ClientMain] first thing.
func (c Clients) Run() (Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, err
	}
	spec, err := json.Marshal(c)
	if err != nil {
		return Result{}, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), clientEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Result{}, fmt.Errorf("client process: %w", err)
	}
	var r Result
	if err := json.Unmarshal(out, &r); err != nil {
		return Result{}, fmt.Errorf("client process: its result: %w", err)
	}
	return r, nil
}

// ClientMain runs a client process's load and prints its Result, if this
// process is one, and reports whether it was: a benchmark program that
// runs Clients calls it first and returns at once when it reports true.
func ClientMain() bool {
	spec := os.Getenv(clientEnv)
	if spec == "" {
		return false
	}
	var c Clients
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fail(err)
	}
	data := Features(c.Rows)
	var call Call
	switch c.Protocol {
	case "gRPC":
		conn, err := grpc.NewClient(c.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fail(err)
		}
		defer conn.Close()
		call = GRPC(pb.NewGRPCInferenceServiceClient(conn), data, c.Rows)
	case "REST":
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * c.Callers, MaxIdleConnsPerHost: 4 * c.Callers}}
		defer client.CloseIdleConnections()
		call = REST(client, c.Target, data, c.Rows)
	default:
		fail(fmt.Errorf("protocol %q", c.Protocol))
	}
	if err := json.NewEncoder(os.Stdout).Encode(ClosedLoop(call, c.Callers, c.Duration)); err != nil {
		fail(err)
	}
	return true
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "client process:", err)
	os.Exit(1)
}
