// Package gcsdriver registers storage's driver for gs:// URLs (Google
// Cloud Storage and its emulators, through gocloud.dev/blob/gcsblob). A
// program that reads or writes gs:// imports it for its side effect:
//
//	import _ "github.com/drainpipe/drainpipe/storage/gcsdriver"
package gcsdriver

import (
	"context"
	"fmt"
	"net/url"
	"os"

	gcstorage "cloud.google.com/go/storage"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/gcsblob" // gs:// for gocloud.dev/blob
	"gocloud.dev/gcp"

	"github.com/drainpipe/drainpipe/storage"
)

func init() { storage.Register(driver{}) }

type driver struct{}

func (driver) Scheme() string { return "gs" }

// Credentials checks that Google's default credentials are there (or not
// needed: an emulator, or an anonymous URL). Without them gocloud.dev
// would print a warning to stdout and fail later on a key it cannot
// parse.
func (driver) Credentials(ctx context.Context, q url.Values) error {
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" ||
		q.Get("anonymous") == "true" || q.Get("access_id") == "-" {
		return nil
	}
	if _, err := gcp.DefaultCredentials(ctx); err != nil {
		return fmt.Errorf("%w: set GOOGLE_APPLICATION_CREDENTIALS, run gcloud auth application-default login, or add anonymous=true for a public bucket (%v)",
			storage.ErrNoCredentials, err)
	}
	return nil
}

func (driver) Quiet(func(any) bool) {}

// PinRead asks for the generation: that generation, or none (in a bucket
// without versions a replaced object's old generation is gone: 404).
func (driver) PinRead(as func(any) bool, v storage.Version) bool {
	var h **gcstorage.ObjectHandle
	if v.Generation == 0 || !as(&h) {
		return false
	}
	*h = (*h).Generation(v.Generation)
	return true
}

func (driver) Conditional(as func(any) bool, v storage.Version) bool {
	var h **gcstorage.ObjectHandle
	if !as(&h) {
		return false
	}
	*h = (*h).If(gcstorage.Conditions{GenerationMatch: v.Generation})
	return true
}

func (driver) ResponseVersion(r *blob.Reader) (storage.Version, bool) {
	var gr *gcstorage.Reader
	if !r.As(&gr) {
		return storage.Version{}, false
	}
	return storage.Version{Generation: gr.Attrs.Generation}, true
}

func (driver) AttributesVersion(a *blob.Attributes) (storage.Version, bool) {
	var attrs gcstorage.ObjectAttrs
	if !a.As(&attrs) {
		return storage.Version{}, false
	}
	return storage.Version{ETag: a.ETag, Generation: attrs.Generation}, true
}

func (driver) Error(error) error { return nil }

// AbortUploads does nothing: GCS discards an unfinished upload itself.
func (driver) AbortUploads(context.Context, *blob.Bucket, string, string, func(string) bool) (int, bool, error) {
	return 0, false, nil
}
