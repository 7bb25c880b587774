package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"gocloud.dev/blob"
)

// isHTTP reports an http:// or https:// URL: read-only, one file a URL,
// read by range requests.
func isHTTP(name string) bool {
	scheme, _, _ := strings.Cut(name, "://")
	scheme = strings.ToLower(scheme)
	return IsURL(name) && (scheme == "https" || scheme == "http")
}

// errReadOnly reports a write, listing or removal asked of an http(s) URL.
var errReadOnly = errors.New("an http(s) URL is read only, one file a URL: it cannot be written, listed or removed")

// httpError is a response that is not the one asked for.
type httpError struct{ status int }

func (e *httpError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
}

// statusError maps a response status to the package's errors.
func statusError(status int) error {
	switch status {
	case http.StatusNotFound, http.StatusGone:
		return ErrNotFound
	case http.StatusPreconditionFailed:
		return ErrChanged
	}
	return &httpError{status}
}

// statHTTP asks for a file's size and version (HEAD): its ETag, or its
// Last-Modified time when it has none or only a weak one.
func statHTTP(ctx context.Context, name string) (*blob.Attributes, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, name, nil)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", redact(name), redactURLError(err))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, objectError(name, statusError(resp.StatusCode))
	}
	if resp.ContentLength < 0 {
		return nil, fmt.Errorf("storage: %s: the server gives no Content-Length, and a file is read by ranges of a known size", redact(name))
	}
	version := resp.Header.Get("ETag")
	if version == "" || strings.HasPrefix(version, "W/") {
		version = resp.Header.Get("Last-Modified")
	}
	return &blob.Attributes{Size: resp.ContentLength, ETag: version}, nil
}

// httpFetch fetches ranges of a file over HTTP, asking for the version
// it was opened at (If-Match its ETag, or If-Unmodified-Since its time).
func httpFetch(name, version string) func(context.Context, int64, int64) (io.ReadCloser, error) {
	return func(ctx context.Context, off, length int64) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, name, nil)
		if err != nil {
			return nil, err
		}
		if length < 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		} else {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+length-1))
		}
		switch {
		case strings.HasPrefix(version, `"`):
			req.Header.Set("If-Match", version)
		case version != "":
			req.Header.Set("If-Unmodified-Since", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, redactURLError(err)
		}
		ok := resp.StatusCode == http.StatusPartialContent || resp.StatusCode == http.StatusOK && off == 0 // the whole file, from its start
		if ok {
			if err := sameVersion(resp.Header, version); err != nil {
				resp.Body.Close()
				return nil, err
			}
			return resp.Body, nil
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			resp.Body.Close()
			return nil, errors.New("the server ignores range requests")
		}
		resp.Body.Close()
		return nil, statusError(resp.StatusCode)
	}
}

// sameVersion checks a response against the version a read is pinned to,
// for a server may ignore If-Match and serve what it holds now.
func sameVersion(h http.Header, version string) error {
	if version == "" {
		return nil
	}
	got := h.Get("ETag")
	if !strings.HasPrefix(version, `"`) {
		got = h.Get("Last-Modified")
	}
	if got != "" && got != version {
		return fmt.Errorf("%w: the server answered version %s for the pinned %s", ErrChanged, got, version)
	}
	return nil
}

// openHTTP opens a file by URL for reading.
func (o *Opener) openHTTP(ctx context.Context, name string) (File, error) {
	attrs, err := statHTTP(ctx, name)
	if err != nil {
		return nil, err
	}
	st, err := o.seen(name, attrs)
	if err != nil {
		return nil, err
	}
	return &objectFile{ctx: ctx, name: name, size: st.size, fetch: httpFetch(name, st.etag), state: st}, nil
}
