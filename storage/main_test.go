package storage_test

import (
	"os"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/aztest"
	"github.com/drainpipe/drainpipe/internal/testing/gcstest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// The object-store servers build (on a new machine) beside the tests.
func TestMain(m *testing.M) {
	os.Exit(testbin.Prepare(m, s3test.BuildVersityGW, s3test.BuildGoFakeS3, gcstest.Build, aztest.Build).Run())
}
