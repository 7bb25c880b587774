package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/tokenizer"
)

const tokenizeLong = `Encodes a text column with a Hugging Face tokenizer.json, exactly as the
Rust tokenizers do, and writes the token ids (and on request the attention
mask, type ids and character offsets) as list columns next to the --keep
columns: to inspect a tokenizer, or to tokenize once for many runs. Rows
are written once each, in order, resumable as predict's.`

const tokenizeExample = `  drainpipe tokenize --tokenizer tokenizer.json --input reviews.parquet --text-column body --keep id --output tokens.parquet
  drainpipe tokenize --tokenizer model/tokenizer.json --input 'data/*.parquet' --text-column body --offsets --output tokens/`

func tokenizeCommand() *cobra.Command {
	c := &cobra.Command{Use: "tokenize --tokenizer FILE --input FILES --text-column COL --output OUT", Short: "Encode a text column to token ids, as Hugging Face's tokenizers do",
		Long: tokenizeLong, Example: tokenizeExample, Args: noArgs("--input")}
	fs := c.Flags()
	var in inputFlags
	var keep listFlag
	in.addFiles(fs)
	tokPath := fs.String("tokenizer", "", "the tokenizer.json (a Hugging Face model folder's)")
	text := fs.String("text-column", "", "the column of text (string, large_string, string_view, dictionary)")
	output := fs.String("output", "", "output file (.parquet, .arrow or .arrows), or a folder of Parquet parts (a trailing /)")
	fs.Var(&keep, "keep", "input columns to write next to the token ids, such as keys; repeatable")
	mask := fs.Bool("mask", false, "also write attention_mask")
	typeIDs := fs.Bool("type-ids", false, "also write token_type_ids")
	offsets := fs.Bool("offsets", false, "also write offsets: each token's [start, end) in characters of the text")
	decode := fs.Bool("decode", false, "also write tokens (each token's piece, as the model has it) and decoded (the ids decoded back to text)")
	batch := fs.Int("batch-size", 4096, "rows tokenized together")
	maxTextBytes := cliflag.Bytes(tokenizer.DefaultMaxTextBytes)
	fs.Var(&maxTextBytes, "max-text-bytes", "the most bytes of a row's text the tokenizer reads; a longer text is read from its head where the tokenizer allows, else the row is set aside (--set-aside) or fails the run")
	resume := fs.Bool("resume", false, "continue an interrupted run of the same job")
	overwrite := fs.Bool("overwrite", false, "replace an existing output")
	c.RunE = func(c *cobra.Command, _ []string) error {
		switch {
		case *tokPath == "":
			return usageError(errors.New("tokenize: --tokenizer is required"))
		case *text == "":
			return usageError(errors.New("tokenize: --text-column is required"))
		case len(in.inputs) == 0:
			return usageError(errors.New("tokenize: --input is required"))
		case *output == "":
			return usageError(errors.New("tokenize: --output is required"))
		}
		data, err := os.ReadFile(*tokPath)
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		tok, err := tokenizer.LoadFile(*tokPath)
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		cols := tokenizer.Columns{IDs: "input_ids"}
		if *mask {
			cols.Mask = "attention_mask"
		}
		if *typeIDs {
			cols.TypeIDs = "token_type_ids"
		}
		if *offsets {
			cols.Offsets = "offsets"
		}
		if *decode {
			cols.Pieces, cols.Decoded = "tokens", "decoded"
		}
		if err := in.checkWrites(*overwrite || *resume, [2]string{"--set-aside", in.setAside}); err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		cfg, err := in.job(*text, "")
		if err != nil {
			return err
		}
		sum := sha256.Sum256(append(data, fmt.Sprint(cols)...))
		cfg.Output, cfg.Keep, cfg.Tokens, cfg.BatchSize = *output, keep, true, *batch
		cfg.Model, cfg.ModelID = columnsModel(cols.Fields()), hex.EncodeToString(sum[:])
		cfg.Resume, cfg.Overwrite = *resume, *overwrite
		var cut atomic.Int64 // texts the truncation cut
		cfg.Stage = func(ds *dataset.Dataset, setAside func(arrow.RecordBatch, int, error)) (*dataset.Dataset, error) {
			opts := []tokenizer.Option{tokenizer.WithMaxTextBytes(int(maxTextBytes)), tokenizer.WithTruncatedCount(&cut)}
			if setAside != nil {
				opts = append(opts, tokenizer.WithRowErrors(setAside))
			}
			return tokenizer.Encodings(ds, tok, *text, cols, cfg.Allocator, opts...)
		}
		cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		prog := in.progress(c.ErrOrStderr(), "tokenizing")
		if prog != nil {
			cfg.Progress = prog.update
		}
		s, err := job.Run(c.Context(), cfg)
		if prog != nil {
			prog.finish()
		}
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		printSummary(c.OutOrStdout(), s)
		fmt.Fprintf(c.OutOrStdout(), "truncated=%d\n", cut.Load())
		return nil
	}
	return c
}

// columnsModel is a device that predicts columns its batches already
// hold (the encodings a job's stage made): the job writes them as it
// writes predictions, once each, in order.
type columnsModel []arrow.Field

var _ device.OutputSchemaer = columnsModel(nil)

func (m columnsModel) OutputSchema() *arrow.Schema { return arrow.NewSchema(m, nil) }

func (m columnsModel) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	for _, f := range m {
		if len(cfg.Schema.FieldIndices(f.Name)) != 1 {
			return nil, fmt.Errorf("no column %q in the batch", f.Name)
		}
	}
	return m, nil
}

func (m columnsModel) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(m))
	for i, f := range m {
		cols[i] = b.Record.Column(b.Record.Schema().FieldIndices(f.Name)[0])
	}
	return array.NewRecordBatch(m.OutputSchema(), cols, b.Record.NumRows()), nil
}

func (columnsModel) Shutdown(context.Context) error { return nil }
