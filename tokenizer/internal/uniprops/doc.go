// Package uniprops holds the tokenizer's Unicode tables, each of the
// version the Rust tokenizers' dependency that reads it was built with
// (Go's unicode package is one version, 15.0), generated beside their
// generators: unicode-tables.mjs from the npm packages
// @unicode/unicode-X, and genage from Unicode's DerivedAge.txt.
package uniprops

//go:generate sh -c "go run ./genage /usr/share/unicode/DerivedAge.txt > newer.go"

// ScriptSpan is a range of code points of one script (Scripts9).
type ScriptSpan struct {
	Lo, Hi rune
	Script uint8
}
