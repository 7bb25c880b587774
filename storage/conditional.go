package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Conditional writes and deletes, for a lock kept in an object (a job's)
// and the writes it fences: each acts only on the version of the object
// a read returned, so of two writers racing on one version only one wins,
// and a holder never deletes a lock another has taken over. A store that ignores the
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
		return onVersion(as, v, "write")
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
		return onVersion(as, v, "delete")
	}}
	if err := b.DeleteWithOptions(ctx, ob.key, opts); err != nil {
		return conditionError(name, err)
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
		folder := IsFolder(name)
		keep := func(key string) bool {
			rest, ok := strings.CutPrefix(key, ob.key)
			return ok && (folder && !strings.Contains(rest, "/") || !folder && rest == "")
		}
		for _, d := range registered() {
			n, ok, err := d.AbortUploads(ctx, b, ob.bucket, ob.key, keep)
			aborted += n
			if err != nil {
				return aborted, objectError(name, err)
			}
			if ok {
				break
			}
		}
	}
	return aborted, nil
}
