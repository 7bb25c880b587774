package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	gcstorage "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Conditional writes and deletes, for a lease kept in an object (a job's
// lock): each acts only on the version of the object a read returned, so
// of two writers racing on one version only one wins, and a holder never
// deletes a lease another has taken over. A store that ignores the
// condition is caught by reading back what was written (see the job's
// lock), not here.

// Version identifies one version of an object, as a conditional request
// names it: its ETag on S3 and Azure, its generation on GCS.
type Version struct {
	ETag       string
	Generation int64
}

// ReadVersion returns an object's content and the version that content
// is, both from one response. A response cut, or whose checksum does not
// match its body (a store that serves an object being replaced may mix
// the two), is asked for again, a bounded number of times.
func (o *Opener) ReadVersion(ctx context.Context, name string) ([]byte, Version, error) {
	if !IsURL(name) || isHTTP(name) {
		return nil, Version{}, fmt.Errorf("storage: %s: conditional reads are for objects", redact(name))
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return nil, Version{}, err
	}
	for attempt := 1; ; attempt++ {
		data, v, err := readVersion(ctx, b, ob.key, name)
		if err == nil || attempt == readAttempts || !retryable(err) {
			return data, v, err
		}
		// A moment for a write under way to end.
		select {
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		case <-ctx.Done():
			return nil, Version{}, err
		}
	}
}

func readVersion(ctx context.Context, b *blob.Bucket, key, name string) ([]byte, Version, error) {
	r, err := b.NewReader(ctx, key, quietRead)
	if err != nil {
		return nil, Version{}, objectError(name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, Version{}, objectError(name, err)
	}
	v := responseVersion(r)
	if v == (Version{}) {
		return nil, Version{}, fmt.Errorf("storage: %s: the store gives no version (ETag) of the object", redact(name))
	}
	return data, v, nil
}

// ReplaceFile writes data to name in place of version v of it, in one
// upload: ErrChanged if the object is no longer at v (another writer got
// there first).
func (o *Opener) ReplaceFile(ctx context.Context, name string, data []byte, v Version) error {
	if !IsURL(name) || isHTTP(name) {
		return fmt.Errorf("storage: %s: conditional writes are for objects", redact(name))
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return err
	}
	opts := &blob.WriterOptions{ContentType: "application/octet-stream", BeforeWrite: func(as func(any) bool) error {
		return onVersion(as, v, "write",
			func(in *transfermanager.UploadObjectInput) **string { return &in.IfMatch },
			func(o *blockblob.UploadStreamOptions) **azblob.AccessConditions { return &o.AccessConditions })
	}}
	if err := b.Upload(ctx, ob.key, bytes.NewReader(data), opts); err != nil {
		return conditionError(name, err)
	}
	return nil
}

// RemoveVersion deletes version v of an object: ErrChanged if the object
// is at another version, ErrNotFound if it is gone.
func (o *Opener) RemoveVersion(ctx context.Context, name string, v Version) error {
	if !IsURL(name) || isHTTP(name) {
		return fmt.Errorf("storage: %s: conditional deletes are for objects", redact(name))
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return err
	}
	opts := &blob.DeleteOptions{BeforeDelete: func(as func(any) bool) error {
		return onVersion(as, v, "delete",
			func(in *s3.DeleteObjectInput) **string { return &in.IfMatch },
			func(o *azblob.DeleteOptions) **azblob.AccessConditions { return &o.AccessConditions })
	}}
	if err := b.DeleteWithOptions(ctx, ob.key, opts); err != nil {
		return conditionError(name, err)
	}
	return nil
}

// onVersion makes a request conditional on version v through a driver's
// As hook: S3's If-Match on the request S (whose field s3IfMatch gives),
// GCS's generation match, Azure's If-Match in the options A (whose access
// conditions azConds gives). what names the request in the error of a
// store with none of these.
func onVersion[S, A any](as func(any) bool, v Version, what string, s3IfMatch func(*S) **string, azConds func(*A) **azblob.AccessConditions) error {
	var s3in *S
	var gcs **gcstorage.ObjectHandle
	var az *A
	switch {
	case as(&s3in):
		*s3IfMatch(s3in) = aws.String(v.ETag)
	case as(&gcs):
		*gcs = (*gcs).If(gcstorage.Conditions{GenerationMatch: v.Generation})
	case as(&az):
		etag := azcore.ETag(v.ETag)
		*azConds(az) = &azblob.AccessConditions{ModifiedAccessConditions: &azblob.ModifiedAccessConditions{IfMatch: &etag}}
	default:
		return fmt.Errorf("this store has no conditional %s", what)
	}
	return nil
}

// conditionError is a conditional request's error: a refused condition is
// ErrChanged.
func conditionError(name string, err error) error {
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("storage: %s: %w (a conditional request was refused)", redact(name), ErrChanged)
	}
	return objectError(name, err)
}

// AbortUploads aborts the incomplete multipart uploads to the objects
// names: a file's URL (its key), or a folder's (ending in /: the keys
// directly in it). A process killed during a large upload leaves one
// behind, which S3 keeps, and bills, until it is aborted; a job aborts
// its own once it holds its output's lock. It returns how many it
// aborted. On GCS and Azure, which discard an unfinished upload by
// themselves, and on local paths, it does nothing.
func (o *Opener) AbortUploads(ctx context.Context, names ...string) (int, error) {
	aborted := 0
	for _, name := range names {
		if !IsURL(name) || isHTTP(name) {
			continue
		}
		ob, b, err := o.open(ctx, name)
		if err != nil {
			return aborted, err
		}
		var client *s3.Client
		if !b.As(&client) {
			continue
		}
		folder := IsFolder(name)
		in := &s3.ListMultipartUploadsInput{Bucket: aws.String(ob.bucket), Prefix: aws.String(ob.key)}
		for more := true; more; {
			page, err := client.ListMultipartUploads(ctx, in, quietClient)
			var api smithy.APIError
			if errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" {
				break // gofakes3's answer for none
			}
			if err != nil {
				return aborted, objectError(name, err)
			}
			for _, up := range page.Uploads {
				key := aws.ToString(up.Key)
				rest, ok := strings.CutPrefix(key, ob.key)
				if !ok || (!folder && rest != "") || (folder && strings.Contains(rest, "/")) {
					continue
				}
				_, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(ob.bucket), Key: up.Key, UploadId: up.UploadId}, quietClient)
				var api smithy.APIError
				if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload") {
					return aborted, objectError(ob.name(key), err)
				}
				aborted++
			}
			more = aws.ToBool(page.IsTruncated)
			in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
		}
	}
	return aborted, nil
}

// quietClient keeps the SDK's client from logging to stderr.
func quietClient(o *s3.Options) { o.Logger = logging.Nop{} }
