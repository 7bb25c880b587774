package storage

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"

	"gocloud.dev/blob"
)

// A Driver gives storage what it needs of a cloud store's SDK beyond
// gocloud.dev/blob's portable API: conditions on a version, the version a
// response holds, the SDK's errors and credentials, incomplete uploads.
// A program registers the drivers of the stores it reaches by importing
// their packages, as database/sql's programs import theirs:
//
//	import _ "github.com/drainpipe/drainpipe/storage/s3driver"    // s3://
//	import _ "github.com/drainpipe/drainpipe/storage/gcsdriver"   // gs://
//	import _ "github.com/drainpipe/drainpipe/storage/azuredriver" // azblob://
//
// This package imports none, so a library built on it links no cloud SDK
// its program does not ask for. Each method is handed gocloud.dev's As
// hooks, which reach only its own SDK's types: a driver answers false
// (or nil) for another's.
type Driver interface {
	// Scheme is the URL scheme the driver's objects are named by.
	Scheme() string
	// Credentials reports, before a bucket is opened, that the SDK will
	// find no credentials (ErrNoCredentials), with what to set; nil if
	// it will, or needs none (an emulator, a public bucket).
	Credentials(ctx context.Context, query url.Values) error
	// Quiet keeps the SDK from logging about a read, a listing or a
	// write: its failures come back as errors, and a CLI's stderr is its
	// user's.
	Quiet(as func(any) bool)
	// PinRead makes a read ask for version v (If-Match its ETag, or its
	// generation); false if as reaches none of its requests.
	PinRead(as func(any) bool, v Version) bool
	// Conditional makes a write or a delete act only on version v;
	// false if as reaches none of its requests.
	Conditional(as func(any) bool, v Version) bool
	// ResponseVersion is the version of the object a read's response
	// holds; false if r is not its SDK's.
	ResponseVersion(r *blob.Reader) (Version, bool)
	// AttributesVersion is the version attributes describe, the
	// generation on GCS; false if they are not its SDK's.
	AttributesVersion(a *blob.Attributes) (Version, bool)
	// Error names what an SDK error means, wrapping ErrDenied (refused
	// credentials: a 403 of any code) or ErrNotFound (a missing bucket,
	// named as such), or returns nil to leave it as it is.
	Error(err error) error
	// AbortUploads aborts the incomplete multipart uploads to the keys
	// of bucket b under prefix that keep accepts, and says how many;
	// false if b is not its SDK's or it has no such uploads.
	AbortUploads(ctx context.Context, b *blob.Bucket, bucket, prefix string, keep func(key string) bool) (int, bool, error)
}

var drivers struct {
	sync.RWMutex
	all []Driver
}

// Register makes a driver available, from its package's init. A second
// driver of a scheme is a programming error: it panics, as
// database/sql.Register does.
func Register(d Driver) {
	drivers.Lock()
	defer drivers.Unlock()
	if slices.ContainsFunc(drivers.all, func(o Driver) bool { return o.Scheme() == d.Scheme() }) {
		panic(fmt.Sprintf("storage: a second driver for %s://", d.Scheme()))
	}
	drivers.all = append(drivers.all, d)
}

// registered returns the drivers registered.
func registered() []Driver {
	drivers.RLock()
	defer drivers.RUnlock()
	return drivers.all
}

// driverFor returns the driver of a scheme, or an error saying which
// package registers it.
func driverFor(scheme string) (Driver, error) {
	for _, d := range registered() {
		if d.Scheme() == scheme {
			return d, nil
		}
	}
	pkg := map[string]string{"s3": "s3driver", "gs": "gcsdriver", "azblob": "azuredriver"}[scheme]
	if pkg == "" {
		return nil, fmt.Errorf("storage: no driver for %s:// URLs", scheme)
	}
	return nil, fmt.Errorf("storage: no driver for %s:// URLs: the program imports none (import _ \"github.com/drainpipe/drainpipe/storage/%s\")", scheme, pkg)
}

// quiet asks every driver to keep its SDK quiet about a request.
func quiet(as func(any) bool) {
	for _, d := range registered() {
		d.Quiet(as)
	}
}

// quietRead is the options of an unpinned read.
var quietRead = &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error { quiet(as); return nil }}

// responseVersion is the version of the object a response holds, as far
// as its driver tells.
func responseVersion(r *blob.Reader) Version {
	for _, d := range registered() {
		if v, ok := d.ResponseVersion(r); ok {
			return v
		}
	}
	return Version{}
}

// attributesVersion is the version attributes describe.
func attributesVersion(a *blob.Attributes) Version {
	for _, d := range registered() {
		if v, ok := d.AttributesVersion(a); ok {
			return v
		}
	}
	return Version{ETag: a.ETag}
}

// onVersion makes a write or a delete conditional on version v; what
// names it in the error of a store with no such condition.
func onVersion(as func(any) bool, v Version, what string) error {
	for _, d := range registered() {
		if d.Conditional(as, v) {
			return nil
		}
	}
	return fmt.Errorf("this store has no conditional %s", what)
}

// driverError is what the drivers make of an SDK error, or nil.
func driverError(err error) error {
	for _, d := range registered() {
		if e := d.Error(err); e != nil {
			return e
		}
	}
	return nil
}
