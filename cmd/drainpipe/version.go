package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// versionCmd prints the module's version, the Go version, the Arrow module
// it was built with and the build tags (openblas, onnx).
func versionCmd(w io.Writer) error {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("version: no build information in this binary")
	}
	arrow, tags := "", "none"
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "github.com/apache/arrow-go/") {
			arrow = d.Path + " " + d.Version
		}
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && s.Value != "" {
			tags = s.Value
		}
	}
	fmt.Fprintf(w, "drainpipe %s\ngo: %s\narrow: %s\ntags: %s\n", bi.Main.Version, bi.GoVersion, arrow, tags)
	return nil
}
