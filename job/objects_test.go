package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/aztest"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/internal/testing/gcstest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/storage"
)

// store is an object store the tests run against for real: its URLs,
// and how to make a bucket.
type store struct {
	name   string
	url    func(bucket, key string) string
	bucket func(t testing.TB, name string)
}

// stores starts an S3 server, a GCS emulator and an Azure Blob emulator
// for the test.
func stores(t *testing.T) []store {
	gcs := gcstest.Start(t)
	az := aztest.Start(t)
	return []store{s3Store(s3test.Start(t)), {"gcs", gcs.URL, gcs.Bucket}, {"azure", az.URL, az.Container}}
}

// proxied is srv's store reached through proxy.
func proxied(srv *s3test.Server, proxy *s3test.FaultProxy) store {
	return store{"s3", proxy.URL, func(t testing.TB, name string) { srv.Bucket(t, name) }}
}

func s3Store(srv *s3test.Server) store {
	return store{"s3", srv.URL, func(t testing.TB, name string) { srv.Bucket(t, name) }}
}

// objectFiles returns, read through the store, the object named key or
// the objects in the folder key (its files, not its sub-folders), by name
// relative to it, with their bytes.
func objectFiles(t *testing.T, st store, bucket, key string) map[string][]byte {
	t.Helper()
	o := storage.NewOpener()
	defer o.Close()
	files := map[string][]byte{}
	if b, err := o.ReadFile(t.Context(), st.url(bucket, key)); err == nil {
		files["."] = b
		return files
	}
	entries, err := o.List(t.Context(), st.url(bucket, strings.TrimSuffix(key, "/")+"/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := o.ReadFile(t.Context(), st.url(bucket, strings.TrimSuffix(key, "/")+"/"+e.Name))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name] = b
	}
	return files
}

// exists reports whether an object is there.
func exists(t *testing.T, url string) bool {
	t.Helper()
	o := storage.NewOpener()
	defer o.Close()
	_, err := o.Stat(t.Context(), url)
	return err == nil
}

// putInputs makes a bucket and uploads the local inputs (a glob) to it
// under in/, and returns the glob that names them there.
func putInputs(t *testing.T, st store, bucket, glob string) string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("inputs %s: %v", glob, err)
	}
	st.bucket(t, bucket)
	o := storage.NewOpener()
	defer o.Close()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.WriteFile(t.Context(), st.url(bucket, "in/"+filepath.Base(f)), b, false); err != nil {
			t.Fatal(err)
		}
	}
	return st.url(bucket, "in/*.parquet")
}

// A job reads from and writes to a real S3 server and a GCS emulator,
// file and folder outputs: every row once, in order, as a job on local
// disk writes them; an interrupted run resumed gives the same objects,
// byte for byte; a run leaves no lock behind.
func TestObjectStorageJob(t *testing.T) {
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 1003)
	for _, st := range stores(t) {
		input := putInputs(t, st, "jobs", local)
		for _, c := range []struct{ name, key string }{{"file", "preds.parquet"}, {"folder", "preds/"}} {
			t.Run(st.name+"/"+c.name, func(t *testing.T) { objectJob(t, st, input, local, m, c.name, c.key) })
		}
	}
}

// objectJob runs the job of TestObjectStorageJob to one output (kind
// "file" or "folder", at key).
func objectJob(t *testing.T, st store, input, local string, m *cpu.MLP, kind, key string) {
	mem := arrowtest.Allocator(t)
	ref := t.TempDir() + "/" + key
	if _, err := job.Run(t.Context(), config(mem, local, ref, m)); err != nil {
		t.Fatal(err)
	}
	out := st.url("jobs", key)
	sum, err := job.Run(t.Context(), config(mem, input, out, m))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 1003 || sum.RowsIn != 1003 {
		t.Fatalf("summary %+v", sum)
	}
	// Each input object was fetched once, by a few range requests.
	if len(sum.Inputs) != 2 {
		t.Fatalf("traffic of %d inputs, want 2: %v", len(sum.Inputs), sum.Inputs)
	}
	for name, tr := range sum.Inputs {
		t.Logf("%s: %+v", name, tr)
		if tr.Bytes < tr.Size*9/10 || tr.Bytes > tr.Size*105/100 || tr.Requests > 12 {
			t.Errorf("%s: %d requests, %d bytes fetched of %d", name, tr.Requests, tr.Bytes, tr.Size)
		}
	}
	if got, want := outputIDs(t, out), outputIDs(t, ref); !slices.Equal(got, want) || len(got) != 1003 {
		t.Fatalf("ids on S3 (%d) differ from the local job's (%d)", len(got), len(want))
	}
	whole := objectFiles(t, st, "jobs", key)
	if kind == "folder" {
		// The parts do not depend on where they were written.
		local := folderFiles(t, ref)
		for name := range local {
			if strings.HasPrefix(name, "part-") && !bytes.Equal(local[name], whole[name]) {
				t.Errorf("%s differs from the local job's", name)
			}
		}
	}
	if lock := st.url("jobs", "."+strings.TrimSuffix(key, "/")+".lock"); exists(t, lock) {
		t.Fatalf("a finished job left its lock: %s", lock)
	}

	// The same job to another output, interrupted and resumed.
	again := "again-" + key
	cfg := config(mem, input, st.url("jobs", again), m)
	interrupt(t, cfg, 400)
	if parts := objectFiles(t, st, "jobs", again+map[string]string{"file": ".parts"}[kind]); len(parts) < 3 {
		t.Fatalf("the interrupted run left %d objects, want its parts and manifest", len(parts))
	}
	cfg.Resume = true
	sum, err = job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ResumedRows == 0 || sum.ResumedRows%128 != 0 || sum.Rows != 1003 || sum.AlreadyComplete {
		t.Fatalf("resume: %+v", sum)
	}
	filetest.EqualFiles(t, "resumed", objectFiles(t, st, "jobs", again), whole)
	if kind == "file" {
		if parts := objectFiles(t, st, "jobs", again+".parts"); len(parts) > 0 {
			t.Fatalf("the file output's parts stayed: %d objects", len(parts))
		}
	}
}

// One job per output on object storage: a lock object, made by a
// conditional write, names the job holding it; a job that died leaves it,
// and the next job says whose it is and takes it over only when told to.
func TestObjectStorageLock(t *testing.T) {
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 300)
	for _, st := range stores(t) {
		t.Run(st.name, func(t *testing.T) { objectLock(t, st, local, m) })
	}
}

func objectLock(t *testing.T, st store, local string, m *cpu.MLP) {
	mem := arrowtest.Allocator(t)
	input := putInputs(t, st, "locks", local)
	stale := `{"host":"worker-7","pid":4242,"started":"2026-11-30T10:00:00Z"}`
	// Written as the dead job wrote it, through the server.
	objects := storage.NewOpener()
	defer objects.Close()
	if err := objects.WriteFile(t.Context(), st.url("locks", ".preds.lock"), []byte(stale), false); err != nil {
		t.Fatal(err)
	}
	cfg := config(mem, input, st.url("locks", "preds/"), m)
	_, err := job.Run(t.Context(), cfg)
	if !errors.Is(err, job.ErrLocked) || !strings.Contains(err.Error(), "host worker-7, pid 4242") || !strings.Contains(err.Error(), "--break-lock") {
		t.Fatalf("a held lock: %v", err)
	}
	if objects := objectFiles(t, st, "locks", "preds"); len(objects) > 0 {
		t.Fatalf("a locked-out job wrote %d objects", len(objects))
	}
	cfg.BreakLock = true
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatalf("taking the lock over: %v", err)
	}
	if exists(t, st.url("locks", ".preds.lock")) {
		t.Fatal("the lock stayed after the run")
	}
}

// A part whose upload fails (the server answers 500 until the SDK gives
// up) is never committed: the run fails naming it, and the resume redoes
// only that part and those after it, to the same bytes. A committed part
// that is gone by the resume is an error, never a hole in the output.
func TestObjectStorageUploadFaults(t *testing.T) {
	srv := s3test.Start(t)
	st := s3Store(srv)
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 1003)
	input := putInputs(t, st, "faults", local)
	if _, err := job.Run(t.Context(), config(mem, input, srv.URL("faults", "ref/"), m)); err != nil {
		t.Fatal(err)
	}
	want := objectFiles(t, st, "faults", "ref")

	proxy := srv.Proxy(t)
	proxy.FailWrites = s3test.Matches("part-00002")
	out := proxy.URL("faults", "preds/")
	cfg := config(mem, input, out, m)
	_, err := job.Run(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "part-00002.parquet") {
		t.Fatalf("a failed upload: %v, want an error naming the part", err)
	}
	got := objectFiles(t, st, "faults", "preds")
	if _, ok := got["part-00002.parquet"]; ok || got["part-00001.parquet"] == nil {
		t.Fatalf("after the failed upload the output holds %v, want parts 0 and 1 only", slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		}))
	}
	proxy.Lock()
	proxy.FailWrites = nil
	proxy.Unlock()
	cfg.Resume = true
	sum, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ResumedRows != 256 {
		t.Fatalf("resumed %d rows, want the 256 of the two committed parts", sum.ResumedRows)
	}
	resumed := objectFiles(t, st, "faults", "preds")
	delete(resumed, "_manifest.json") // it names its inputs, through the proxy
	delete(want, "_manifest.json")
	filetest.EqualFiles(t, "resumed after a failed upload", resumed, want)

	// A committed part lost before the resume.
	cfg.Resume, cfg.Overwrite = false, true
	interrupt(t, cfg, 400)
	if err := os.Remove(filepath.Join(srv.Root, "faults", "preds", "part-00001.parquet")); err != nil {
		t.Fatal(err)
	}
	cfg.Resume, cfg.Overwrite = true, false
	if _, err := job.Run(context.Background(), cfg); !errors.Is(err, job.ErrPartsDamaged) || !strings.Contains(err.Error(), "part-00001.parquet") {
		t.Fatalf("a lost part: %v, want ErrPartsDamaged naming it", err)
	}
}

// An input object replaced after the job planned from it is an error
// naming it, never a mix of the two versions: the job reads the versions
// it planned from (pinned by their ETags).
func TestObjectStorageInputChangesUnderTheJob(t *testing.T) {
	srv := s3test.Start(t)
	st := s3Store(srv)
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 1003)
	input := putInputs(t, st, "pins", local)
	objects := storage.NewOpener()
	defer objects.Close()
	other, err := os.ReadFile(filepath.Join(srv.Root, "pins", "in", "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(mem, input, t.TempDir()+"/out/", m)
	// While a.parquet is read, before the first batch is predicted,
	// b.parquet is replaced.
	cfg.Predict = append(cfg.Predict, predict.WithHooks(predict.Hook{Before: func(_ context.Context, b device.Batch) error {
		if b.Index == 0 {
			return objects.WriteFile(context.Background(), srv.URL("pins", "in/b.parquet"), other, true)
		}
		return nil
	}}))
	_, err = job.Run(t.Context(), cfg)
	if !errors.Is(err, storage.ErrChanged) || !strings.Contains(err.Error(), "in/b.parquet") {
		t.Fatalf("an input replaced under the job: %v, want ErrChanged naming it", err)
	}
}

// --break-lock against a job still running: the breaker holds the lock,
// the first job stops at its next commit (ErrLockLost) without touching
// what the breaker writes, its release leaves the breaker's lock alone
// (a third job is still locked out), and the output is the breaker's
// alone, byte for byte as a run of its own.
func TestBreakLockAgainstALiveHolder(t *testing.T) {
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 300)
	other, err := cpu.NewMLP([]int{width, 16, 3}, cpu.ReLU, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	all := append(stores(t), s3Store(s3test.StartGoFakeS3(t)))
	all[len(all)-1].name = "gofakes3"
	for _, st := range all {
		t.Run(st.name, func(t *testing.T) {
			input := putInputs(t, st, "live", local)
			first := config(mem, input, st.url("live", "preds/"), m)
			second := config(mem, input, st.url("live", "preds/"), other)
			second.ModelID, second.BreakLock, second.Overwrite = "other", true, true

			aRunning, bHolds, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var once, onceB sync.Once
			first.Progress = func(int64, int64) {
				once.Do(func() { close(aRunning); <-bHolds })
			}
			second.Progress = func(int64, int64) {
				onceB.Do(func() { close(bHolds); <-aDone })
			}
			aErr := make(chan error, 1)
			go func() {
				_, err := job.Run(t.Context(), first)
				aErr <- err
			}()
			select {
			case <-aRunning:
			case err := <-aErr:
				t.Fatalf("the first job ended before its first batch: %v", err)
			}
			bErr := make(chan error, 1)
			go func() {
				_, err := job.Run(t.Context(), second)
				bErr <- err
			}()
			select {
			case err := <-aErr:
				if !errors.Is(err, job.ErrLockLost) {
					t.Fatalf("the first job, its lock broken: %v, want ErrLockLost", err)
				}
			case err := <-bErr:
				close(bHolds) // let the first job go
				t.Fatalf("the breaker ended before its first batch: %v (the first job: %v)", err, <-aErr)
			}
			third := config(mem, input, st.url("live", "preds/"), other)
			if _, err := job.Run(t.Context(), third); !errors.Is(err, job.ErrLocked) {
				t.Fatalf("a third job while the breaker runs: %v, want ErrLocked", err)
			}
			close(aDone)
			if err := <-bErr; err != nil {
				t.Fatalf("the breaker: %v", err)
			}
			if exists(t, st.url("live", ".preds.lock")) {
				t.Fatal("the lock stayed after the breaker's run")
			}
			alone := config(mem, input, st.url("live", "alone/"), other)
			alone.ModelID = "other"
			if _, err := job.Run(t.Context(), alone); err != nil {
				t.Fatal(err)
			}
			filetest.EqualFiles(t, "the breaker's output", objectFiles(t, st, "live", "preds"), objectFiles(t, st, "live", "alone"))
		})
	}
}

// A file output's conditional upload whose answer is lost: the SDK's
// retry is refused by the object its first try made, which the writer
// knows as its own, so the job succeeds instead of reporting its own
// output as one that exists.
func TestOutputWriteLostAnswer(t *testing.T) {
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 300)
	srv := s3test.Start(t)
	proxy := srv.Proxy(t)
	st := proxied(srv, proxy)
	input := putInputs(t, st, "lost", local)
	proxy.Lock()
	proxy.DropAnswers = s3test.FirstAnswer("PUT", "/lost/preds.parquet")
	proxy.Unlock()
	sum, err := job.Run(t.Context(), config(mem, input, st.url("lost", "preds.parquet"), m))
	if err != nil || sum.Rows != 300 {
		t.Fatalf("a file output whose upload's answer was lost: %+v, %v", sum, err)
	}
}

// Inputs and a folder output whose keys hold characters a URL gives
// meaning to (a space, %, ?, #, +, unicode), written escaped: the job
// reads every row, writes its parts, manifest, marker and lock under
// those keys, and the folder reads back by URL, every row once.
func TestObjectKeysWithURLCharacters(t *testing.T) {
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 300)
	srv := s3test.Start(t)
	srv.Bucket(t, "keys")
	o := storage.NewOpener()
	defer o.Close()
	files, _ := filepath.Glob(local)
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		key := []string{"in put/a%1?x#.parquet", "in put/b+é.parquet"}[i]
		if err := o.WriteFile(t.Context(), srv.URL("keys", (&url.URL{Path: key}).EscapedPath()), b, false); err != nil {
			t.Fatal(err)
		}
	}
	out := srv.URL("keys", (&url.URL{Path: "out #1/"}).EscapedPath())
	sum, err := job.Run(t.Context(), config(mem, srv.URL("keys", "in%20put/*.parquet"), out, m))
	if err != nil || sum.Rows != 300 {
		t.Fatalf("%+v, %v", sum, err)
	}
	names, err := o.Glob(t.Context(), out)
	if err != nil || len(names) == 0 {
		t.Fatalf("the output folder: %v, %v", names, err)
	}
	if ids := outputIDs(t, out); len(ids) != 300 || !slices.IsSorted(ids) {
		t.Fatalf("%d ids read back, want 300 in order", len(ids))
	}
	if exists(t, srv.URL("keys", "%2Eout%20%231.lock")) || exists(t, srv.URL("keys", ".out%20%231.lock")) {
		t.Fatal("the lock stayed")
	}
}

// Uploads a killed run left incomplete (S3 keeps, and bills, them until
// they are aborted) are aborted by the resume, once it holds the lock:
// the output file's and the part the killed run was writing, never
// another object's.
func TestRunAbortsOrphanUploads(t *testing.T) {
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 300)
	for name, srv := range map[string]*s3test.Server{"versitygw": s3test.Start(t)} {
		t.Run(name, func(t *testing.T) {
			st := s3Store(srv)
			input := putInputs(t, st, "orphans", local)
			client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
				Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, "")})
			cfg := config(mem, input, st.url("orphans", "preds.parquet"), m)
			cfg.Resume = true
			interrupt(t, cfg, 150)
			var man struct{ Parts []json.RawMessage }
			if err := json.Unmarshal(objectFiles(t, st, "orphans", "preds.parquet.parts/manifest.json")["."], &man); err != nil || len(man.Parts) == 0 {
				t.Fatalf("the interrupted run's manifest: %d parts, %v", len(man.Parts), err)
			}
			next := fmt.Sprintf("preds.parquet.parts/part-%06d.arrow", len(man.Parts))
			keys := []string{"preds.parquet", next, "preds.parquet2", "other/x.parquet"}
			for _, key := range keys {
				up, err := client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String("orphans"), Key: aws.String(key)})
				if err != nil {
					t.Fatal(err)
				}
				_, err = client.UploadPart(t.Context(), &s3.UploadPartInput{Bucket: aws.String("orphans"), Key: aws.String(key), UploadId: up.UploadId,
					PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 5<<20))})
				if err != nil {
					t.Fatal(err)
				}
			}
			if sum, err := job.Run(t.Context(), cfg); err != nil || sum.ResumedRows == 0 {
				t.Fatalf("resume: %+v, %v", sum, err)
			}
			list, err := client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String("orphans")})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, up := range list.Uploads {
				left = append(left, aws.ToString(up.Key))
			}
			slices.Sort(left)
			if want := []string{"other/x.parquet", "preds.parquet2"}; !slices.Equal(left, want) {
				t.Fatalf("uploads left: %v, want %v", left, want)
			}
		})
	}
}

// A job whose store stops answering ends promptly when its context is
// cancelled: the request under way is abandoned, whether it lists or
// reads its inputs (the plan, a row group fetched ahead of the decoders)
// or uploads its output (a part, the file streamed; what a cancelled run
// still writes in order, its manifest, has a grace of its own), and the
// run returns context.Canceled.
func TestCancelAgainstAStalledStore(t *testing.T) {
	// What a cancelled run still does in order (a manifest, the lock's
	// release) has this long.
	defer job.SetCleanupGrace(2 * time.Second)()
	mem := arrowtest.Allocator(t)
	local, m := setup(t, mem, 3000)
	srv := s3test.Start(t)
	proxy := srv.Proxy(t)
	st := proxied(srv, proxy)
	input := putInputs(t, st, "stall", local)
	for _, c := range []struct {
		writes bool
		after  int
		output string
	}{{false, 0, "out/"}, {false, 4, "out/"}, {true, 1, "out/"}, {true, 2, "out/"}, {true, 2, "out.parquet"}} {
		t.Run(fmt.Sprintf("writes %v, after %d, %s", c.writes, c.after, c.output), func(t *testing.T) {
			stalled := make(chan struct{}, 1)
			output := t.TempDir() + "/" + c.output
			if c.writes {
				output = st.url("stall", fmt.Sprintf("outputs/%d/%s", c.after, c.output))
			}
			proxy.Lock()
			proxy.Gets, proxy.Writes, proxy.StallAfter, proxy.Stall, proxy.StallWrites = 0, 0, c.after, stalled, c.writes
			proxy.Unlock()
			defer func() {
				proxy.Lock()
				proxy.Stall = nil
				proxy.Unlock()
			}()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := job.Run(ctx, config(mem, input, output, m))
				done <- err
			}()
			select {
			case <-stalled:
			case err := <-done:
				t.Fatalf("the job ended before the store stalled: %v", err)
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled against a stalled store: %v, want context.Canceled", err)
				}
				lock := st.url("stall", fmt.Sprintf("outputs/%d/.%s.lock", c.after, strings.TrimSuffix(c.output, "/")))
				if c.writes && exists(t, lock) {
					t.Fatal("a cancelled run left its lock")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the job did not end within 20 s of its cancellation against a stalled store")
			}
		})
	}
}
