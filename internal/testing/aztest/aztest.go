// Package aztest runs a real Azure Blob Storage emulator for tests:
// Azurite (the npm package azurite, MIT), installed from the npm registry
// once into the user's cache folder and started on 127.0.0.1 with a free
// port and a temporary folder. azblob:// URLs reach it with its
// well-known development account, which Start puts in the environment.
package aztest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"

	// azblob:// for the tests that use the emulator.
	_ "github.com/drainpipe/drainpipe/storage/azuredriver"
)

// Version is the Azurite release the tests run.
const Version = "3.37.0"

// The emulator's development account (its documented, public key).
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running emulator.
type Server struct {
	addr string
}

// Start installs (once) and starts an emulator for the test, which stops
// it when it ends. A machine without node and npm skips the test (fails
// it under CI).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := install(t.Context())
	if err != nil {
		testbin.Missing(t, "aztest: Azurite %s: %v", Version, err)
	}
	dir := t.TempDir()
	addr, _ := testbin.Start(t, bin, func(addr string) []string {
		host, port, _ := net.SplitHostPort(addr)
		return []string{"--blobHost", host, "--blobPort", port, "--location", dir, "--skipApiVersionCheck", "--silent", "--loose"}
	})
	t.Setenv("AZURE_STORAGE_ACCOUNT", Account)
	t.Setenv("AZURE_STORAGE_KEY", Key)
	return &Server{addr: addr}
}

// Container makes a container (3 to 63 lowercase letters, digits, dashes).
func (s *Server) Container(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, s.URL(name, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var c *container.Client
	if !b.As(&c) {
		t.Fatal("aztest: no container client")
	}
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatalf("aztest: create container %s: %v", name, err)
	}
}

// URL returns the azblob:// URL of key in a container.
func (s *Server) URL(container, key string) string {
	return fmt.Sprintf("azblob://%s/%s?protocol=http&domain=%s&localemu=true", container, key, s.addr)
}

// Build installs Azurite once a machine, for testbin.Prepare; Start
// installs it too.
func Build(ctx context.Context) error {
	_, err := install(ctx)
	return err
}

// install returns the path of azurite-blob, installing the package into
// the user's cache folder if it is not there yet.
func install(ctx context.Context) (string, error) {
	dir, err := testbin.NPM(ctx, "azurite-"+Version, "azurite@"+Version)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "node_modules", ".bin", "azurite-blob"), nil
}
