// Package azuredriver registers storage's driver for azblob:// URLs
// (Azure Blob Storage and Azurite, through gocloud.dev/blob/azureblob). A
// program that reads or writes azblob:// imports it for its side effect:
//
//	import _ "github.com/drainpipe/drainpipe/storage/azuredriver"
package azuredriver

import (
	"context"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// for gocloud.dev/blob

	"github.com/drainpipe/drainpipe/storage"
)

func init() { storage.Register(driver{}) }

type driver struct{}

func (driver) Scheme() string { return "azblob" }

func (driver) Credentials(context.Context, url.Values) error { return nil }

func (driver) Quiet(func(any) bool) {}

func ifMatch(v storage.Version) *azblob.AccessConditions {
	etag := azcore.ETag(v.ETag)
	return &azblob.AccessConditions{ModifiedAccessConditions: &azblob.ModifiedAccessConditions{IfMatch: &etag}}
}

func (driver) PinRead(as func(any) bool, v storage.Version) bool {
	var o *azblob.DownloadStreamOptions
	if v.ETag == "" || !as(&o) {
		return false
	}
	o.AccessConditions = ifMatch(v)
	return true
}

func (driver) Conditional(as func(any) bool, v storage.Version) bool {
	var up *blockblob.UploadStreamOptions
	var del *azblob.DeleteOptions
	switch {
	case as(&up):
		up.AccessConditions = ifMatch(v)
	case as(&del):
		del.AccessConditions = ifMatch(v)
	default:
		return false
	}
	return true
}

func (driver) ResponseVersion(r *blob.Reader) (storage.Version, bool) {
	var resp azblob.DownloadStreamResponse
	if !r.As(&resp) {
		return storage.Version{}, false
	}
	if resp.ETag == nil {
		return storage.Version{}, true
	}
	return storage.Version{ETag: string(*resp.ETag)}, true
}

func (driver) AttributesVersion(*blob.Attributes) (storage.Version, bool) {
	return storage.Version{}, false
}

func (driver) Error(error) error { return nil }

// AbortUploads does nothing: Azure discards uncommitted blocks itself.
func (driver) AbortUploads(context.Context, *blob.Bucket, string, string, func(string) bool) (int, bool, error) {
	return 0, false, nil
}
