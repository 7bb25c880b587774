package storage_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The library links no cloud SDK its program does not ask for: storage
// imports no driver (the commands import theirs, as database/sql's
// programs do), so neither do the packages that read and write files.
func TestLibraryLinksNoCloudSDK(t *testing.T) {
	for _, pkg := range []string{"github.com/drainpipe/drainpipe/storage", "github.com/drainpipe/drainpipe/job", "github.com/drainpipe/drainpipe/sink",
		"github.com/drainpipe/drainpipe/dataset/fileset", "github.com/drainpipe/drainpipe/serve"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, sdk := range []string{"github.com/aws/", "github.com/Azure/azure-sdk-for-go/", "cloud.google.com/go/storage", "gocloud.dev/blob/s3blob", "gocloud.dev/blob/gcsblob", "gocloud.dev/blob/azureblob"} {
				if strings.HasPrefix(dep, sdk) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
	// The commands link the drivers.
	out, err := exec.Command("go", "list", "-deps", "github.com/drainpipe/drainpipe/cmd/drainpipe").Output()
	if err != nil || !strings.Contains(string(out), "github.com/drainpipe/drainpipe/storage/s3driver") {
		t.Fatalf("the CLI does not link the S3 driver: %v", err)
	}
}
