// Package cloudenv sets the cloud SDKs' defaults a command wants for its
// process, before any SDK reads its environment. A library leaves the
// environment to its application; the commands are applications.
package cloudenv

import "os"

// Defaults turns off, unless the environment says otherwise, the AWS
// SDK's fallback to IMDSv1 (unauthenticated instance metadata, which AWS
// asks to disable): without it, a run with no credentials where an
// instance metadata service refuses IMDSv2 tokens printed the SDK's
// "falling back to IMDSv1" warning before its own one-line error.
// AWS_EC2_METADATA_V1_DISABLED=false keeps the fallback.
func Defaults() {
	if _, set := os.LookupEnv("AWS_EC2_METADATA_V1_DISABLED"); !set {
		os.Setenv("AWS_EC2_METADATA_V1_DISABLED", "true")
	}
}
