// Package storage opens input files wherever they live: local paths, and
// objects by URL on S3 (s3://), Google Cloud Storage (gs://) and Azure
// Blob Storage (azblob://) through the Go Cloud Development Kit
// (gocloud.dev/blob), with the clouds' standard credential chains. URLs
// are as gocloud.dev opens them: an S3-compatible server is named in the
// query, s3://bucket/key?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1,
// or by the AWS SDK's AWS_ENDPOINT_URL_S3.
//
// An [Opener] lists (Glob: globs in the key, matched against a listing
// under their literal prefix), stats and opens them. An object is read by
// range requests (ReadAt asks for exactly the bytes wanted: a Parquet
// reader fetches its footer, then a column chunk a request) or streamed
// (Read). A request the server refuses (500, 503 SlowDown) is retried by
// the SDK's retryer; a response cut mid-body is asked for again from
// where it stopped, a bounded number of times. Every request of a read
// asks for the version the read opened (If-Match its ETag on S3), so an
// object replaced under a read is [ErrChanged], never a mix of two
// versions. Errors name the URL with
// query values that may hold secrets left out.
//
// Writing outputs to object storage (parts as objects, conditional writes
// for locks) is not here yet; callers refuse output URLs.
package storage
