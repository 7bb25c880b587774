package serve

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// gRPC health answers what Kubernetes' gRPC probes ask: SERVING for the
// server and each model once ready, NOT_FOUND for a name it does not
// serve, NOT_SERVING once a drain begins; reflection lists the services
// (what grpcurl reads).
func TestHealthAndReflection(t *testing.T) {
	r := startServer(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithDrainGrace(2*time.Second))
	<-r.srv.Ready()
	hc := healthpb.NewHealthClient(r.conn)
	for _, service := range []string{"", "mlp"} {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v, %v", service, resp, err)
		}
	}
	if _, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("health of an unknown service: %v", err)
	}

	stream, err := reflectionpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	var services []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"inference.GRPCInferenceService", "grpc.health.v1.Health"} {
		if !slices.Contains(services, want) {
			t.Fatalf("reflection lists %v, not %s", services, want)
		}
	}

	done := make(chan error, 1)
	go func() { done <- r.shutdown() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "mlp"})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health still %v, %v after the drain began", resp, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// testCA makes a certificate authority and certificates it signs, for a
// TLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drainpipe test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a certificate for 127.0.0.1 (a server's) or a client's.
func (ca *testCA) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "drainpipe test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Both listeners serve TLS, with client certificates required (mutual
// TLS): a client with one infers over REST and gRPC; one without is
// refused in the handshake.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	srv, err := New([]ModelSpec{mlpSpec(t, testMLP(t))}, WithTLS(&tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, 2, x509.ExtKeyUsageServerAuth)},
		ClientCAs:    ca.pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}))
	if err != nil {
		t.Fatal(err)
	}
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	gl, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, hl, gl) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-srv.Ready()

	client := ca.issue(t, 3, x509.ExtKeyUsageClientAuth)
	withCert := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{client}}
	r := &running{url: "https://" + hl.Addr().String(), http: &http.Client{Transport: &http.Transport{TLSClientConfig: withCert}}}
	defer r.http.CloseIdleConnections()
	if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 2), false, nil), nil); code != 200 {
		t.Fatalf("REST over mutual TLS: %d %s", code, body)
	}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	defer anonymous.CloseIdleConnections()
	if resp, err := anonymous.Get(r.url + "/v2/health/ready"); err == nil {
		resp.Body.Close()
		t.Fatal("a client without a certificate was served")
	}

	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(withCert)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewGRPCInferenceServiceClient(conn).ModelInfer(t.Context(), grpcRows("mlp", rows(0, 2))); err != nil {
		t.Fatalf("gRPC over mutual TLS: %v", err)
	}
}

// The access log writes a line a request, and can be turned off.
func TestAccessLog(t *testing.T) {
	for _, on := range []bool{true, false} {
		var buf syncBuffer
		r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), WithAccessLog(on))
		for range 3 {
			r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 1), false, nil), nil)
		}
		if n := strings.Count(buf.String(), "msg=request"); on && n != 3 || !on && n != 0 {
			t.Fatalf("access log %t: %d request lines", on, n)
		}
	}
}

// syncBuffer is a bytes.Buffer a logger and a test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
