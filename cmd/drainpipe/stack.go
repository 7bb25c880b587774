package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/seq"
)

// stackInfo is a model folder's stack as drainpipe runs it: what reads
// the text, how long a row may be, how per-token outputs become one
// vector, and what reads a classifier's logits.
type stackInfo struct {
	ModelType     string   `json:"model_type,omitempty"` // config.json's
	Tokenizer     string   `json:"tokenizer,omitempty"`  // its model, or "" without tokenizer.json
	Vocab         int      `json:"vocab,omitempty"`
	PadID         int64    `json:"pad_id"`
	MaxLength     int      `json:"max_length"`
	PositionStart int64    `json:"position_start"`
	LeftPadding   bool     `json:"left_padding,omitempty"`
	Pooling       []string `json:"pooling,omitempty"`
	Modules       []string `json:"modules,omitempty"` // after pooling, in order
	Head          string   `json:"head,omitempty"`    // the function on the logits
	Labels        []string `json:"labels,omitempty"`
}

// folderStack describes f's stack.
func folderStack(f *hfmodel.Folder) *stackInfo {
	st := &stackInfo{ModelType: f.ModelType, PadID: f.PadID, MaxLength: f.MaxLength, PositionStart: f.PositionStart, LeftPadding: f.LeftPadding}
	if f.Tokenizer != nil {
		st.Tokenizer, st.Vocab = f.Tokenizer.Model()
	}
	for _, p := range f.Poolings {
		st.Pooling = append(st.Pooling, p.String())
	}
	for _, m := range f.Modules {
		st.Modules = append(st.Modules, moduleName(m))
	}
	if len(f.Head.Labels) > 0 {
		st.Head, st.Labels = f.Head.Function.String(), f.Head.Labels
	}
	return st
}

// moduleName names a module after pooling as sentence-transformers
// names its own.
func moduleName(m seq.Module) string {
	switch m := m.(type) {
	case *hfmodel.Dense:
		return fmt.Sprintf("Dense %d→%d (%s)", m.In, m.Out, m.Activation)
	case seq.Normalize:
		return "Normalize"
	}
	return fmt.Sprintf("%T", m)
}

func printStack(w io.Writer, s *stackInfo) {
	tok := "none (give --tokenizer to read text)"
	if s.Tokenizer != "" {
		tok = fmt.Sprintf("%s, %d tokens", s.Tokenizer, s.Vocab)
	}
	fmt.Fprintf(w, "model type: %s\ntokenizer: %s\npad id: %d\nmax length: %d tokens\n", s.ModelType, tok, s.PadID, s.MaxLength)
	if len(s.Pooling) > 0 {
		fmt.Fprintf(w, "pooling: %s\n", strings.Join(s.Pooling, ", "))
	}
	if len(s.Modules) > 0 {
		fmt.Fprintf(w, "then: %s\n", strings.Join(s.Modules, ", "))
	}
	if s.Head != "" {
		fmt.Fprintf(w, "head: %s over %d labels: %s\n", s.Head, len(s.Labels), strings.Join(s.Labels, ", "))
	}
}
