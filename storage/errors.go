package storage

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/gcerrors"
)

// objectError names the object (its URL without secrets) in err, and says
// in one line what a person can act on: a missing object or bucket
// (ErrNotFound), credentials refused (ErrDenied) or not found
// (ErrNoCredentials), an object that changed (ErrChanged).
func objectError(name string, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrChanged) || errors.Is(err, ErrNoCredentials) {
		return fmt.Errorf("storage: %s: %w", redact(name), err)
	}
	// What the SDK says, as its driver reads it: a missing bucket (named,
	// not the object the request was for: a job's first request is for
	// its hidden lock), credentials refused whatever the code.
	if e := driverError(err); e != nil {
		switch {
		case errors.Is(e, ErrNotFound):
			return fmt.Errorf("%w: %s: no such bucket", ErrNotFound, redact(bucketOf(name)))
		case errors.Is(e, ErrDenied):
			return fmt.Errorf("storage: %s: %w", redact(name), e)
		}
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
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

// bucketOf returns the URL of the bucket an object's URL names, its query
// kept.
func bucketOf(name string) string {
	ob, err := parse(name)
	if err != nil {
		return name
	}
	return ob.name("")
}

// redactURLError drops secrets from the URL a net/http error repeats (a
// presigned URL's X-Amz-Signature, say).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact(ue.URL)
	}
	return err
}

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
