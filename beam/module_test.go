package dpbeam

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const coreModule = "github.com/drainpipe/drainpipe"

// A user of the Beam module gets the core at the version beam/go.mod
// requires, from a module proxy, with no replace directive and no
// workspace. This publishes the committed core and Beam module (HEAD) to a
// proxy in a folder, under the version beam/go.mod requires, and builds a
// program of a new module that imports both, as `go get` would give it.
func TestModuleResolvesAsPublished(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module from a proxy (-short)")
	}
	root := gitRoot(t)
	goMod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("beam/go.mod", goMod, nil)
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for _, r := range f.Require {
		if r.Mod.Path == coreModule {
			version = r.Mod.Version
		}
	}
	for _, r := range f.Replace {
		t.Errorf("beam/go.mod has %s => %s: its users never see a replace", r.Old, r.New)
	}
	switch {
	case version == "":
		t.Fatalf("beam/go.mod does not require %s", coreModule)
	case version == "v0.0.0" || module.IsPseudoVersion(version) && strings.HasPrefix(version, "v0.0.0-00010101"):
		t.Fatalf("beam/go.mod requires %s %s, a version no tag can carry", coreModule, version)
	}

	proxy := t.TempDir()
	publish(t, proxy, root, coreModule, version, "")
	publish(t, proxy, root, coreModule+"/beam", version, "beam")

	user := t.TempDir()
	write(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26\n")
	write(t, filepath.Join(user, "main.go"), `package main

import (
	"fmt"

	"github.com/drainpipe/drainpipe/device/cpu"
	dpbeam "github.com/drainpipe/drainpipe/beam"
)

func main() { fmt.Println(dpbeam.Config{}.BatchSize, cpu.DefaultFeature) }
`)
	upstream := strings.TrimSpace(goEnv(t, "GOPROXY"))
	env := append(os.Environ(),
		"GOWORK=off", "GOFLAGS=-mod=mod",
		"GOPROXY="+(&url.URL{Scheme: "file", Path: filepath.ToSlash(proxy)}).String()+","+upstream,
		// The proxy in the folder is not in the checksum database.
		"GONOSUMDB="+coreModule, "GOPRIVATE=", "GONOPROXY=")
	for _, args := range [][]string{
		{"get", coreModule + "/beam@" + version},
		{"mod", "tidy"},
		{"build", "-o", os.DevNull, "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = user, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	got, err := os.ReadFile(filepath.Join(user, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := coreModule + " " + version; !strings.Contains(string(got), want) {
		t.Errorf("the user's go.mod does not require %s:\n%s", want, got)
	}
}

// publish writes module path at version, the files committed at HEAD under
// dir of the repository at root, to a GOPROXY folder.
func publish(t *testing.T, proxy, root, path, version, dir string) {
	t.Helper()
	esc, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	mv := module.Version{Path: path, Version: version}
	if err := modzip.CreateFromVCS(&z, mv, root, "HEAD", dir); err != nil {
		t.Fatalf("module zip of %s: %v", mv, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(z.Bytes()), int64(z.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var goMod []byte
	for _, f := range zr.File {
		if f.Name == mv.String()+"/go.mod" {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, err = b.ReadFrom(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			goMod = b.Bytes()
		}
	}
	if goMod == nil {
		t.Fatalf("%s has no go.mod", mv)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, version+".zip"), z.String())
	write(t, filepath.Join(at, version+".mod"), string(goMod))
	write(t, filepath.Join(at, version+".info"), string(info))
	write(t, filepath.Join(at, "list"), version+"\n")
}

func gitRoot(t *testing.T) string {
	t.Helper()
	// A missing tool fails the test, naming it, as every test's does.
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("missing what this test needs: git: %v", err)
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("missing what this test needs: a git checkout: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return string(out)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
