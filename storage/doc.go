// Package storage reads and writes files wherever they live: local paths,
// and objects by URL on S3 (s3://), Google Cloud Storage (gs://) and Azure
// Blob Storage (azblob://) through the Go Cloud Development Kit
// (gocloud.dev/blob), with the clouds' standard credential chains; and
// files on web servers (http://, https://), read only.
//
// Like database/sql, it imports no driver: a program imports those of the
// stores it reaches, for their side effect (the drainpipe commands import
// all three), and links no other cloud's SDK:
//
//	import _ "github.com/drainpipe/drainpipe/storage/s3driver"    // s3://
//	import _ "github.com/drainpipe/drainpipe/storage/gcsdriver"   // gs://
//	import _ "github.com/drainpipe/drainpipe/storage/azuredriver" // azblob://
//
// A URL whose driver is not imported is an error naming the package. URLs are as
// gocloud.dev opens them: an S3-compatible server is named in the query,
// s3://bucket/key?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1,
// or by the AWS SDK's AWS_ENDPOINT_URL_S3.
//
// Reading: an [Opener] lists (Glob: globs in the key, matched against a
// listing under their literal prefix), stats and opens. An object is read
// by range requests (ReadAt asks for exactly the bytes wanted, but that
// the first read ending at the object's end fetches its last 16 KiB, a
// footer's length and the footer before it in one request, which the
// Opener keeps for the object's later reads) or streamed (Read). A request the server refuses (500, 503 SlowDown) is retried by
// the SDK's retryer; a response cut mid-body is asked for again from
// where it stopped, a bounded number of times. An Opener pins each
// object's version from its first look on (or from a planner's, carried
// over: [Opener.Expect]): every request asks for it (If-Match its ETag,
// its generation on GCS) and every response is checked to be it, for
// some stores ignore the condition; so an object replaced under a read,
// or between a job's plan and its read, is [ErrChanged], never a mix of
// two versions. It counts each object's requests and bytes
// ([Opener.Traffic]).
//
// Writing: [Opener.Create] writes a file or object that appears whole or
// not at all (a local file renamed into place; an object whose upload,
// in parts when large, completes), replacing what is there or, for a
// write that may not, a conditional write (If-None-Match) that of two
// writers only one wins ([ErrExists]). List, Remove and RemoveAll work
// on folders: local ones, and key prefixes ending in /.
//
// Errors name the URL with query values that may hold secrets left out.
package storage
