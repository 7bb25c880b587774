package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	gcstorage "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/bmatcuk/doublestar/v4"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
	"gocloud.dev/gcp"

	"github.com/drainpipe/drainpipe/format"
)

// ErrNotFound reports an object or file that does not exist.
var ErrNotFound = errors.New("no such file or object")

// IsURL reports whether name is a URL with a scheme (s3://bucket/key)
// rather than a local path.
func IsURL(name string) bool {
	scheme, rest, ok := strings.Cut(name, "://")
	return ok && rest != "" && scheme != "" && !strings.ContainsAny(scheme, `/\.`)
}

// Opener opens local files and objects by URL. It keeps each bucket it
// opened until Close; it is safe for concurrent use.
//
// An Opener reads each object as it was when it first saw it (its ETag,
// pinned by the first Stat or Open): a later Open of an object that
// changed since, and any read of an object replaced under it, fails with
// ErrChanged, so a job that plans from one look at its inputs and reads
// them later never mixes two versions. It counts the requests and bytes
// each object's reads take (Traffic).
type Opener struct {
	mu      sync.Mutex
	buckets map[string]*blob.Bucket // by bucket URL
	objects map[string]*objectState // by URL
}

// objectState is what an Opener knows of an object it read.
type objectState struct {
	etag              string // pinned
	generation        int64  // pinned too, on GCS (where reads match it, not the ETag)
	size              int64
	requests, fetched atomic.Int64
}

// NewOpener returns an Opener.
func NewOpener() *Opener {
	return &Opener{buckets: map[string]*blob.Bucket{}, objects: map[string]*objectState{}}
}

// Traffic is what reading one object took.
type Traffic struct {
	Size     int64 `json:"size"`
	Requests int64 `json:"requests"`
	// Bytes is the bytes fetched: Size for one full read, less for a read
	// of some columns, more for parts read twice.
	Bytes int64 `json:"bytes"`
}

// Traffic returns the requests made and bytes fetched for each object
// read through o, by URL (without secrets).
func (o *Opener) Traffic() map[string]Traffic {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]Traffic, len(o.objects))
	for name, st := range o.objects {
		out[redact(name)] = Traffic{Size: st.size, Requests: st.requests.Load(), Bytes: st.fetched.Load()}
	}
	return out
}

// seen records an object's attributes (one request made): the first
// look pins its ETag; a later one that finds another is ErrChanged.
func (o *Opener) seen(name string, attrs *blob.Attributes) (*objectState, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.objects[name]
	if st == nil {
		st = &objectState{etag: attrs.ETag, size: attrs.Size}
		var gcs gcstorage.ObjectAttrs
		if attrs.As(&gcs) {
			st.generation = gcs.Generation
		}
		o.objects[name] = st
	}
	st.requests.Add(1)
	if st.etag != attrs.ETag || st.size != attrs.Size {
		return st, fmt.Errorf("storage: %s: %w since it was first read (ETag %s, now %s)", redact(name), ErrChanged, st.etag, attrs.ETag)
	}
	return st, nil
}

// Close closes the buckets opened.
func (o *Opener) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for u, b := range o.buckets {
		errs = append(errs, b.Close())
		delete(o.buckets, u)
	}
	return errors.Join(errs...)
}

// object is a URL split into its bucket (with the URL's query, which
// carries settings such as an S3 endpoint) and key.
type object struct {
	scheme, bucket, key, query string
}

func parse(name string) (object, error) {
	u, err := url.Parse(name)
	if err != nil {
		return object{}, fmt.Errorf("storage: %w", err)
	}
	if u.Host == "" {
		return object{}, fmt.Errorf("storage: %s: no bucket in the URL", redact(name))
	}
	return object{scheme: u.Scheme, bucket: u.Host, key: strings.TrimPrefix(u.Path, "/"), query: u.RawQuery}, nil
}

func (ob object) bucketURL() string {
	u := ob.scheme + "://" + ob.bucket
	if ob.query != "" {
		u += "?" + ob.query
	}
	return u
}

// name is the URL of key in ob's bucket.
func (ob object) name(key string) string {
	u := ob.scheme + "://" + ob.bucket + "/" + key
	if ob.query != "" {
		u += "?" + ob.query
	}
	return u
}

func (o *Opener) bucket(ctx context.Context, ob object) (*blob.Bucket, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.buckets[ob.bucketURL()]; b != nil {
		return b, nil
	}
	if err := gcsCredentials(ctx, ob); err != nil {
		return nil, err
	}
	b, err := blob.OpenBucket(ctx, ob.bucketURL())
	if err != nil {
		return nil, fmt.Errorf("storage: open bucket %s: %w", redact(ob.bucketURL()), err)
	}
	o.buckets[ob.bucketURL()] = b
	return b, nil
}

// Info describes a file or object.
type Info struct {
	Size int64
	// ETag identifies the object's content (empty for a local file).
	ETag string
}

// Stat returns what name is.
func (o *Opener) Stat(ctx context.Context, name string) (Info, error) {
	if !IsURL(name) {
		st, err := os.Stat(name)
		if errors.Is(err, os.ErrNotExist) {
			return Info{}, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		if err != nil {
			return Info{}, err
		}
		return Info{Size: st.Size()}, nil
	}
	if isHTTP(name) {
		attrs, err := statHTTP(ctx, name)
		if err != nil {
			return Info{}, err
		}
		return Info{Size: attrs.Size, ETag: attrs.ETag}, nil
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return Info{}, err
	}
	attrs, err := b.Attributes(ctx, ob.key)
	if err != nil {
		return Info{}, objectError(name, err)
	}
	return Info{Size: attrs.Size, ETag: attrs.ETag}, nil
}

// Pin returns what an input is, as Stat does, and pins an object's
// version for the Opener's later reads of it: a job that plans from
// these attributes reads the objects it planned from, or fails with
// ErrChanged.
func (o *Opener) Pin(ctx context.Context, name string) (Info, error) {
	if !IsURL(name) {
		return o.Stat(ctx, name)
	}
	var st *objectState
	if isHTTP(name) {
		attrs, err := statHTTP(ctx, name)
		if err != nil {
			return Info{}, err
		}
		if st, err = o.seen(name, attrs); err != nil {
			return Info{}, err
		}
	} else {
		ob, b, err := o.open(ctx, name)
		if err != nil {
			return Info{}, err
		}
		if st, err = o.statPinned(ctx, b, name, ob.key); err != nil {
			return Info{}, err
		}
	}
	return Info{Size: st.size, ETag: st.etag}, nil
}

// statPinned is Stat for a read: the object's attributes, checked
// against the version the Opener pinned.
func (o *Opener) statPinned(ctx context.Context, b *blob.Bucket, name, key string) (*objectState, error) {
	attrs, err := b.Attributes(ctx, key)
	if err != nil {
		return nil, objectError(name, err)
	}
	return o.seen(name, attrs)
}

func (o *Opener) open(ctx context.Context, name string) (object, *blob.Bucket, error) {
	ob, err := parse(name)
	if err != nil {
		return object{}, nil, err
	}
	b, err := o.bucket(ctx, ob)
	return ob, b, err
}

// objectError names the object (its URL without secrets) in err, and says
// in one line what a person can act on: a missing object or bucket
// (ErrNotFound), credentials refused (ErrDenied) or not found
// (ErrNoCredentials), an object that changed (ErrChanged).
func objectError(name string, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrChanged) || errors.Is(err, ErrNoCredentials) {
		return fmt.Errorf("storage: %s: %w", redact(name), err)
	}
	var api smithy.APIError
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
			return fmt.Errorf("%w: %s: no such bucket", ErrNotFound, redact(name))
		}
		return fmt.Errorf("%w: %s", ErrNotFound, redact(name))
	case gcerrors.FailedPrecondition:
		return fmt.Errorf("storage: %s: %w", redact(name), ErrChanged)
	case gcerrors.PermissionDenied:
		return fmt.Errorf("storage: %s: %w", redact(name), ErrDenied)
	}
	if msg := err.Error(); strings.Contains(msg, "get credentials") || strings.Contains(msg, "failed to retrieve credentials") {
		return fmt.Errorf("storage: %s: %w: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run where an instance role is", redact(name), ErrNoCredentials)
	}
	return fmt.Errorf("storage: %s: %w", redact(name), err)
}

var (
	// ErrDenied reports credentials the server refuses for an object.
	ErrDenied = errors.New("access denied: the server refuses these credentials for it")
	// ErrNoCredentials reports a cloud store reached with no credentials.
	ErrNoCredentials = errors.New("no credentials found")
)

// redact drops a URL's query values that may hold secrets, keeping their
// names.
func redact(name string) string {
	u, err := url.Parse(name)
	if err != nil || u.RawQuery == "" {
		return name
	}
	q := u.Query()
	for k := range q {
		switch strings.ToLower(k) {
		case "endpoint", "region", "use_path_style", "s3forcepathstyle", "awssdk", "disable_https", "domain", "protocol", "localemu":
		default:
			q.Set(k, "…")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// File is an open file or object: read it in sequence, or at offsets
// (an object by range requests).
type File interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	Size() int64
}

// Open opens name for reading.
func (o *Opener) Open(ctx context.Context, name string) (File, error) {
	if !IsURL(name) {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return localFile{f, st.Size()}, nil
	}
	if isHTTP(name) {
		return o.openHTTP(ctx, name)
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return nil, err
	}
	st, err := o.statPinned(ctx, b, name, ob.key)
	if err != nil {
		return nil, err
	}
	return &objectFile{ctx: ctx, name: name, size: st.size, fetch: blobFetch(b, ob.key, st.pinned()), state: st}, nil
}

// ErrChanged reports an object that changed while it was being read.
var ErrChanged = errors.New("the object changed while it was read")

// pinned returns the read options that make every request of a read ask
// for the object as it was pinned: If-Match its ETag on S3 and Azure, its
// generation on GCS. A file replaced under a running read is then an
// error (412, FailedPrecondition), never a mix of two versions.
func (st *objectState) pinned() *blob.ReaderOptions {
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		var s3in *s3.GetObjectInput
		var gcs **gcstorage.ObjectHandle
		var az *azblob.DownloadStreamOptions
		quiet(as)
		switch {
		case st.etag == "" && st.generation == 0:
		case as(&s3in):
			s3in.IfMatch = aws.String(st.etag)
		case st.generation != 0 && as(&gcs):
			// That generation, or none: in a bucket without versions a
			// replaced object's old generation is gone (404).
			*gcs = (*gcs).Generation(st.generation)
		case as(&az):
			etag := azcore.ETag(st.etag)
			az.AccessConditions = &azblob.AccessConditions{ModifiedAccessConditions: &azblob.ModifiedAccessConditions{IfMatch: &etag}}
		}
		return nil
	}}
}

// quiet keeps the AWS SDK from logging, to stderr, a warning for every
// whole-object GET whose response carries no checksum (an S3-compatible
// server's often does not): a read's result is checked by its length and
// pinned version, and a CLI's stderr is its user's.
func quiet(as func(any) bool) {
	var s3opts *[]func(*s3.Options)
	if as(&s3opts) {
		*s3opts = append(*s3opts, func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true })
	}
}

// quietRead is the options of an unpinned read.
var quietRead = &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error { quiet(as); return nil }}

type localFile struct {
	*os.File
	size int64
}

func (f localFile) Size() int64 { return f.size }

// objectFile reads an object by range requests: ReadAt asks for the bytes
// it is given room for; Read streams from the offset on.
type objectFile struct {
	ctx       context.Context
	name      string
	size, off int64
	// fetch asks for length bytes from off (-1: to the end) of the
	// version the file was opened at, in one request.
	fetch  func(ctx context.Context, off, length int64) (io.ReadCloser, error)
	stream io.ReadCloser // open from off, for Read
	state  *objectState  // counts the requests and bytes
}

// blobFetch fetches ranges of a bucket's object, pinned to a version.
func blobFetch(b *blob.Bucket, key string, opts *blob.ReaderOptions) func(context.Context, int64, int64) (io.ReadCloser, error) {
	return func(ctx context.Context, off, length int64) (io.ReadCloser, error) {
		return b.NewRangeReader(ctx, key, off, length, opts)
	}
}

// retryable reports whether a request that failed with err may succeed
// if made again: a cut body, a refusal the server says is passing.
func retryable(err error) bool {
	var he *httpError
	if errors.As(err, &he) {
		return he.status >= 500 || he.status == http.StatusTooManyRequests
	}
	return !errors.Is(err, ErrChanged) && !errors.Is(err, ErrNotFound) && gcerrors.Code(err) == gcerrors.Unknown
}

func (f *objectFile) Size() int64 { return f.size }

// readAttempts bounds the requests one read makes when a response is cut
// mid-body: each asks for the rest of the range. (The SDK retries a
// request the server refuses, such as a 503, on its own.)
const readAttempts = 4

func (f *objectFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("storage: %s: negative offset %d", redact(f.name), off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-off)
	got := int64(0)
	for attempt := 1; got < n; attempt++ {
		k, err := f.readRange(p[got:n], off+got)
		got += int64(k)
		if err != nil && (attempt == readAttempts || f.ctx.Err() != nil || !retryable(err)) {
			return int(got), f.readError(fmt.Errorf("bytes %d-%d: %w", off, off+n-1, err))
		}
	}
	if n < int64(len(p)) {
		return int(got), io.EOF
	}
	return int(got), nil
}

// readError names the object in a read's error; an object gone since it
// was opened (or, on GCS, whose pinned generation is gone) has changed.
func (f *objectFile) readError(err error) error {
	if errors.Is(err, ErrNotFound) || gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("storage: %s: %w (gone, or replaced)", redact(f.name), ErrChanged)
	}
	return objectError(f.name, err)
}

// readRange reads len(p) bytes from off in one request.
func (f *objectFile) readRange(p []byte, off int64) (int, error) {
	f.state.requests.Add(1)
	r, err := f.fetch(f.ctx, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	f.state.fetched.Add(int64(n))
	return n, err
}

func (f *objectFile) Read(p []byte) (int, error) {
	if f.off >= f.size {
		return 0, io.EOF
	}
	for attempt := 1; ; attempt++ {
		if f.stream == nil {
			f.state.requests.Add(1)
			r, err := f.fetch(f.ctx, f.off, -1)
			if err != nil {
				return 0, f.readError(err)
			}
			f.stream = r
		}
		n, err := f.stream.Read(p)
		f.off += int64(n)
		f.state.fetched.Add(int64(n))
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, io.EOF) && f.off >= f.size:
			return n, io.EOF
		case n > 0:
			// Cut, or ended early, after some bytes: the next Read asks
			// for the rest.
			f.stream.Close()
			f.stream = nil
			return n, nil
		}
		// Cut before a byte came: ask again for the rest, a bounded number of times.
		f.stream.Close()
		f.stream = nil
		if attempt == readAttempts || f.ctx.Err() != nil {
			return 0, f.readError(err)
		}
	}
}

func (f *objectFile) Seek(offset int64, whence int) (int64, error) {
	to := offset
	switch whence {
	case io.SeekCurrent:
		to += f.off
	case io.SeekEnd:
		to += f.size
	}
	if to < 0 {
		return f.off, fmt.Errorf("storage: %s: seek to %d", redact(f.name), to)
	}
	if to != f.off && f.stream != nil {
		f.stream.Close()
		f.stream = nil
	}
	f.off = to
	return to, nil
}

func (f *objectFile) Close() error {
	if f.stream != nil {
		err := f.stream.Close()
		f.stream = nil
		return err
	}
	return nil
}

// Glob returns the files or objects a pattern names, sorted:
//   - a local glob, or a URL whose key holds glob characters, matched
//     against a listing of the keys under the pattern's literal prefix;
//   - and ? stay within a folder, ** spans folders (doublestar syntax);
//   - a folder (a local directory, or a URL whose key ends in /): the data
//     files below it (names a format is known for), passing over names
//     that start with _ or . (markers, temporary files); a folder holding
//     _manifest.json but no _SUCCESS, an output still being written, is
//     refused;
//   - any other name, if it exists.
func (o *Opener) Glob(ctx context.Context, pattern string) ([]string, error) {
	if !IsURL(pattern) {
		return o.globLocal(pattern)
	}
	if isHTTP(pattern) {
		if IsFolder(pattern) || strings.ContainsAny(pattern, "*?[{") {
			return nil, fmt.Errorf("storage: %s: %w", redact(pattern), errReadOnly)
		}
		if _, err := o.Stat(ctx, pattern); err != nil {
			return nil, err
		}
		return []string{pattern}, nil
	}
	ob, b, err := o.open(ctx, pattern)
	if err != nil {
		return nil, err
	}
	folder := ob.key == "" || strings.HasSuffix(ob.key, "/")
	if !folder && !strings.ContainsAny(ob.key, "*?[{") {
		if _, err := o.Stat(ctx, pattern); err != nil {
			return nil, err
		}
		return []string{pattern}, nil
	}
	keyPattern, prefix := ob.key+"**", ob.key
	if !folder {
		if !doublestar.ValidatePattern(ob.key) {
			return nil, fmt.Errorf("storage: pattern %q: %w", redact(pattern), doublestar.ErrBadPattern)
		}
		keyPattern, prefix = ob.key, ob.key[:strings.IndexAny(ob.key, "*?[{")]
	}
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, objectError(pattern, err)
		}
		if !obj.IsDir {
			keys = append(keys, obj.Key)
		}
	}
	if folder {
		if err := finished(keys, prefix, pattern); err != nil {
			return nil, err
		}
		if named, ok, err := o.manifestFiles(ctx, pattern, keys, prefix); ok || err != nil {
			return named, err
		}
	}
	var out []string
	for _, key := range keys {
		if ok, _ := doublestar.Match(keyPattern, key); ok && (!folder || dataFile(key)) {
			out = append(out, ob.name(key))
		}
	}
	slices.Sort(out)
	return out, nil
}

func (o *Opener) globLocal(pattern string) ([]string, error) {
	if strings.ContainsAny(pattern, "*?[{") {
		if !doublestar.ValidatePattern(filepath.ToSlash(pattern)) {
			return nil, fmt.Errorf("storage: pattern %q: %w", pattern, doublestar.ErrBadPattern)
		}
		return doublestar.FilepathGlob(pattern, doublestar.WithFilesOnly())
	}
	st, err := os.Stat(pattern)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, pattern)
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{pattern}, nil
	}
	var names, files []string
	err = filepath.WalkDir(pattern, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != pattern && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(pattern, path)
			names = append(names, filepath.ToSlash(rel))
			if dataFile(rel) {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := finished(names, "", pattern); err != nil {
		return nil, err
	}
	if named, ok, err := o.manifestFiles(context.Background(), pattern, names, ""); ok || err != nil {
		return named, err
	}
	slices.Sort(files)
	return files, nil
}

// dataFile reports whether a file or key names data a format is known for,
// and is not a marker or temporary file (a name starting with _ or .).
func dataFile(name string) bool {
	base := path.Base(filepath.ToSlash(name))
	if strings.HasPrefix(base, "_") || strings.HasPrefix(base, ".") {
		return false
	}
	_, err := format.Of(base)
	return err == nil
}

// finished refuses a folder that holds an output still being written: a
// _manifest.json at its top without a _SUCCESS.
func finished(names []string, prefix, folder string) error {
	if slices.Contains(names, prefix+"_manifest.json") && !slices.Contains(names, prefix+"_SUCCESS") {
		return fmt.Errorf("storage: %s holds an output still being written (a _manifest.json, no _SUCCESS)", redact(folder))
	}
	return nil
}

// manifestFiles returns the files a finished output folder's manifest
// names, in its order, when it has one (_manifest.json beside _SUCCESS):
// the dataset the writer committed, not whatever else the folder holds,
// such as the files of an earlier run of more shards. names is the
// folder's listing (keys under prefix, for an object store).
func (o *Opener) manifestFiles(ctx context.Context, folder string, names []string, prefix string) ([]string, bool, error) {
	if !slices.Contains(names, prefix+"_manifest.json") || !slices.Contains(names, prefix+"_SUCCESS") {
		return nil, false, nil
	}
	data, err := o.ReadFile(ctx, Join(folder, "_manifest.json"))
	if err != nil {
		return nil, true, err
	}
	// A job's folder lists its parts, a Beam pipeline's its files.
	var m struct {
		Parts, Files []struct {
			File string `json:"file"`
		}
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, true, fmt.Errorf("storage: %s: unreadable _manifest.json: %w", redact(folder), err)
	}
	var out []string
	for _, f := range append(m.Parts, m.Files...) {
		if f.File == "" {
			continue // a part whose rows were all set aside
		}
		if !slices.Contains(names, prefix+f.File) {
			return nil, true, fmt.Errorf("storage: %s: its _manifest.json names %s, which is not there", redact(folder), f.File)
		}
		out = append(out, Join(folder, f.File))
	}
	if len(out) == 0 {
		return nil, false, nil // names no file: read what the folder holds
	}
	return out, true, nil
}

// gcsCredentials checks, before a gs:// bucket is opened, that Google's
// default credentials are there (or not needed: an emulator, or an
// anonymous URL). Without them gocloud.dev would print a warning to
// stdout and fail later on a key it cannot parse.
func gcsCredentials(ctx context.Context, ob object) error {
	if ob.scheme != "gs" || os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" {
		return nil
	}
	if q, _ := url.ParseQuery(ob.query); q.Get("anonymous") == "true" || q.Get("access_id") == "-" {
		return nil
	}
	if _, err := gcp.DefaultCredentials(ctx); err != nil {
		return fmt.Errorf("storage: %s: %w: set GOOGLE_APPLICATION_CREDENTIALS, run gcloud auth application-default login, or add anonymous=true for a public bucket (%v)",
			redact(ob.bucketURL()), ErrNoCredentials, err)
	}
	return nil
}
