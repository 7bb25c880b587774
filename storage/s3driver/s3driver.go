// Package s3driver registers storage's driver for s3:// URLs (Amazon S3
// and S3-compatible servers, through gocloud.dev/blob/s3blob and the AWS
// SDK). A program that reads or writes s3:// imports it for its side
// effect:
//
//	import _ "github.com/drainpipe/drainpipe/storage/s3driver"
package s3driver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // s3:// for gocloud.dev/blob

	"github.com/drainpipe/drainpipe/storage"
)

func init() { storage.Register(driver{}) }

type driver struct{}

func (driver) Scheme() string { return "s3" }

// Credentials leaves the SDK's chain to report itself: the storage
// package names its error (ErrNoCredentials) when a request fails.
func (driver) Credentials(context.Context, url.Values) error { return nil }

// Quiet keeps the SDK from logging a warning for every whole-object GET
// whose response carries no checksum (an S3-compatible server's often
// does not), or for a body cut before its end.
func (driver) Quiet(as func(any) bool) {
	var opts *[]func(*s3.Options)
	if as(&opts) {
		*opts = append(*opts, quietClient)
	}
}

func quietClient(o *s3.Options) {
	o.DisableLogOutputChecksumValidationSkipped = true
	o.Logger = logging.Nop{}
}

func (driver) PinRead(as func(any) bool, v storage.Version) bool {
	var in *s3.GetObjectInput
	if v.ETag == "" || !as(&in) {
		return false
	}
	in.IfMatch = aws.String(v.ETag)
	return true
}

func (driver) Conditional(as func(any) bool, v storage.Version) bool {
	var up *transfermanager.UploadObjectInput
	var del *s3.DeleteObjectInput
	switch {
	case as(&up):
		up.IfMatch = aws.String(v.ETag)
	case as(&del):
		del.IfMatch = aws.String(v.ETag)
	default:
		return false
	}
	return true
}

func (driver) ResponseVersion(r *blob.Reader) (storage.Version, bool) {
	var out s3.GetObjectOutput
	if !r.As(&out) {
		return storage.Version{}, false
	}
	return storage.Version{ETag: aws.ToString(out.ETag)}, true
}

func (driver) AttributesVersion(a *blob.Attributes) (storage.Version, bool) {
	var head s3.HeadObjectOutput
	if !a.As(&head) {
		return storage.Version{}, false
	}
	return storage.Version{ETag: a.ETag}, true
}

// Error reads S3's answers: NoSuchBucket is a missing bucket; any 403 or
// 401 is credentials refused (SignatureDoesNotMatch for a wrong secret,
// InvalidAccessKeyId for a wrong key id: gocloud.dev maps neither).
func (driver) Error(err error) error {
	var api smithy.APIError
	var resp *awshttp.ResponseError
	switch {
	case errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket":
		return storage.ErrNotFound
	case errors.As(err, &resp) && (resp.HTTPStatusCode() == http.StatusForbidden || resp.HTTPStatusCode() == http.StatusUnauthorized):
		if errors.As(err, &api) {
			return fmt.Errorf("%w (%s)", storage.ErrDenied, api.ErrorCode())
		}
		return storage.ErrDenied
	}
	return nil
}

// AbortUploads lists the bucket's incomplete uploads under prefix (S3
// lists them by prefix; MinIO and VersityGW only by an object's name) and
// aborts those keep accepts.
func (driver) AbortUploads(ctx context.Context, b *blob.Bucket, bucket, prefix string, keep func(string) bool) (int, bool, error) {
	var client *s3.Client
	if !b.As(&client) {
		return 0, false, nil
	}
	aborted := 0
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for {
		page, err := client.ListMultipartUploads(ctx, in, quietClient)
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" {
			return aborted, true, nil // gofakes3's answer for none
		}
		if err != nil {
			return aborted, true, err
		}
		for _, up := range page.Uploads {
			if !keep(aws.ToString(up.Key)) {
				continue
			}
			_, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: up.Key, UploadId: up.UploadId}, quietClient)
			if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload") {
				return aborted, true, err
			}
			aborted++
		}
		if !aws.ToBool(page.IsTruncated) {
			return aborted, true, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}
