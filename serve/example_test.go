package serve_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve"
)

// A model served over REST on a loopback port, asked for one row's
// prediction, then drained.
func ExampleServer() {
	mlp, _ := cpu.NewMLP([]int{4, 8, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	srv, err := serve.New([]serve.ModelSpec{{
		Name:    "mlp",
		Model:   mlp,
		Input:   arrow.NewSchema([]arrow.Field{{Name: "features", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)}}, nil),
		Options: []predict.Option{predict.WithBatchSizes(1, 8, 32)},
	}})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Run(ctx, ln, nil) }()
	<-srv.Ready()

	resp, err := http.Post("http://"+ln.Addr().String()+"/v2/models/mlp/infer", "application/json", strings.NewReader(`{
		"id": "a1",
		"inputs": [{"name": "features", "datatype": "FP32", "shape": [2, 4], "data": [[1, 2, 3, 4], [-4, -3, -2, -1]]}],
		"outputs": [{"name": "class"}]
	}`))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	stop() // drain: answer what was taken, shut the sessions down
	fmt.Println("drained:", <-done)
	// Output:
	// 200 {"model_name":"mlp","model_version":"1","id":"a1","outputs":[{"name":"class","datatype":"INT64","shape":[2],"data":[2,2]}]}
	// drained: <nil>
}
