package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"gocloud.dev/blob"
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
	// tails is the bytes of objects' tails kept (see objectState.tail),
	// at most tailsKept.
	tails atomic.Int64
}

// tailsKept bounds the bytes of the objects' tails an Opener keeps: a
// thousand objects' worth, so a set of many objects does not hold a
// tail of each.
const tailsKept = 1000 * tailAhead

// objectState is what an Opener knows of an object it read.
type objectState struct {
	etag              string // pinned
	generation        int64  // pinned too, on GCS (where reads match it, not the ETag)
	size              int64
	expected          bool // pinned by Expect, not yet looked at
	byExpect          bool // pinned by Expect: ReadFile reads it at the pin
	requests, fetched atomic.Int64

	// tail is the object's last bytes (see tailAhead), kept for every
	// read of it through the Opener: planning reads a file's footer, and
	// the reads after it the data before, so no byte is fetched twice.
	tail   atomic.Pointer[[]byte]
	tailMu sync.Mutex // held while it is fetched
	opener *Opener    // whose budget of tails it counts against
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
	if st == nil || st.expected {
		if st == nil {
			st = &objectState{etag: attrs.ETag, size: attrs.Size, opener: o}
			o.objects[name] = st
		}
		st.expected = false
		st.generation = attributesVersion(attrs).Generation
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
	if strings.Contains(name, "#") {
		// What follows a # is a fragment, never sent: the query with it,
		// an endpoint's too, and the request would go to the cloud's own.
		return object{}, fmt.Errorf("storage: %s: a # in a URL ends what is sent, the query (and its endpoint) with it: write a # of a key as %%23", redact(name))
	}
	return object{scheme: u.Scheme, bucket: u.Host, key: strings.TrimPrefix(u.Path, "/"), query: u.RawQuery}, nil
}

// escapeKey escapes a key (or a part of one) for a URL's path: ?, #, %,
// spaces and what else a URL's path does not hold as it is; / stays.
func escapeKey(key string) string {
	return (&url.URL{Path: key}).EscapedPath()
}

func (ob object) bucketURL() string {
	u := ob.scheme + "://" + ob.bucket
	if ob.query != "" {
		u += "?" + ob.query
	}
	return u
}

// name is the URL of key in ob's bucket, the key escaped so that the
// URL parses back to it.
func (ob object) name(key string) string {
	u := ob.scheme + "://" + ob.bucket + "/" + escapeKey(key)
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
	d, err := driverFor(ob.scheme)
	if err != nil {
		return nil, err
	}
	q, _ := url.ParseQuery(ob.query)
	if err := d.Credentials(ctx, q); err != nil {
		return nil, fmt.Errorf("storage: %s: %w", redact(ob.bucketURL()), err)
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

// Expect pins an object to the version a planner saw (its Pin's Info,
// carried to another process, such as a Beam worker): the Opener's first
// look at it, and every read after, must find that version, or fail with
// ErrChanged. A local path is not pinned.
func (o *Opener) Expect(name string, v Info) {
	if !IsURL(name) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objects[name] == nil {
		o.objects[name] = &objectState{etag: v.ETag, size: v.Size, expected: true, byExpect: true, opener: o}
	}
}

// statPinned is Stat for a read: the object's attributes, checked
// against the version the Opener pinned. An object pinned already needs
// no request: every response of a read is checked against the pin, so a
// change is found by the read itself.
func (o *Opener) statPinned(ctx context.Context, b *blob.Bucket, name, key string) (*objectState, error) {
	o.mu.Lock()
	st := o.objects[name]
	o.mu.Unlock()
	if st != nil && !st.expected {
		return st, nil
	}
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
