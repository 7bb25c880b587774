// Package testing_test keeps the test helpers apart from the library.
package testing_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The test helpers under internal/testing may import anything; no
// library package, command or example imports them (only tests, and
// the benchmark programs), and no production helper of internal/
// depends on a high-level package (predict, job, serve).
func TestHelpersApart(t *testing.T) {
	const module = "github.com/drainpipe/drainpipe/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	checked := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, deps := strings.TrimPrefix(fields[0], module), fields[1:]
		if strings.HasPrefix(pkg, "internal/testing/") || strings.HasPrefix(pkg, "bench") {
			continue
		}
		checked++
		for _, d := range deps {
			if strings.HasPrefix(d, module+"internal/testing/") {
				t.Errorf("%s depends on the test helper %s", pkg, strings.TrimPrefix(d, module))
			}
			if strings.HasPrefix(pkg, "internal/") {
				for _, high := range []string{"predict", "job", "serve"} {
					if d == module+high {
						t.Errorf("the production helper %s depends on %s", pkg, high)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d packages; go list gave:\n%s", checked, out)
	}
}
