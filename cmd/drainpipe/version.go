package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func versionCommand() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "The build: module version, source revision, Go, Arrow, tags", Args: noArgs(""),
		RunE: func(c *cobra.Command, _ []string) error {
			text, err := versionText()
			if err != nil {
				return err
			}
			_, err = io.WriteString(c.OutOrStdout(), text)
			return err
		}}
}

// versionText is the module's version, the source revision, the Go
// version, the Arrow module it was built with and the build tags
// (openblas, onnx).
func versionText() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("version: no build information in this binary")
	}
	var w strings.Builder
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
	fmt.Fprintf(&w, "drainpipe %s\n", bi.Main.Version)
	if rev := vcs(bi); rev != "" {
		fmt.Fprintf(&w, "revision: %s\n", rev)
	}
	fmt.Fprintf(&w, "go: %s\narrow: %s\ntags: %s\n", bi.GoVersion, arrow, tags)
	return w.String(), nil
}

// vcs describes the source revision the binary was built from (go build
// in a git checkout records it): the commit, its time, and "dirty" if the
// tree had changes.
func vcs(bi *debug.BuildInfo) string {
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return fmt.Sprintf("%s (%s%s)", rev, at, dirty)
}
