package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"time"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/spf13/cobra"
)

const predictLong = `Runs a model over Parquet, Arrow IPC or CSV files (local, or on object
storage by URL) in fixed-size batches, the last one padded, and writes
one prediction row per input row, in order, next to the --keep columns.
The output is a file, or a folder of Parquet parts (a trailing /). The
predictions are committed in durable parts: a job killed at any moment
continues with --resume, and writes the bytes an uninterrupted run would.

With --shard i/n and a folder output, n processes share the folder: the
inputs are cut into units (--part-rows rows of whole row groups, named by
input and first row), process i writes the units u ≡ i (mod n) not
committed yet, each by a conditional write, and the process that commits
the last one writes the manifest and _SUCCESS. A rerun with any n skips
the committed units; --overwrite replaces another job's folder.`

const predictExample = `  drainpipe predict --model model.dpmlp --input 'data/*.parquet' --output preds.parquet --keep id
  drainpipe predict --model model.onnx --input 's3://bucket/data/**/*.parquet' --output 's3://bucket/preds/' --keep id
  drainpipe predict --model model.dpmlp --input in.csv --features 'f*' --output out.arrow --set-aside bad.parquet
  drainpipe predict ... --resume          # continue after a kill
  drainpipe predict ... --output 's3://bucket/preds/' --shard "$JOB_COMPLETION_INDEX/8"   # one of 8 processes sharing a folder`

func predictCommand() *cobra.Command {
	c := &cobra.Command{Use: "predict --model M --input FILES --output OUT", Short: "Run a model over files: every row once, in order, resumable", Long: predictLong, Example: predictExample, Args: noArgs("--input")}
	fs := c.Flags()
	var in inputFlags
	var keep listFlag
	in.add(fs, "")
	modelPath := fs.String("model", "", "the model: a drainpipe MLP file (.dpmlp), or in a build with -tags onnx an ONNX file (.onnx) or a model folder as sentence-transformers and transformers save one (onnx/model.onnx, config.json, tokenizer.json, …)")
	output := fs.String("output", "", "output file (.parquet, .arrow or .arrows), or a folder (a trailing /, or an existing folder) of Parquet parts, a manifest and _SUCCESS")
	batch := fs.Int("batch-size", 256, "rows per device batch (the global batch size)")
	fs.Var(&keep, "keep", "input columns to write next to the predictions, such as keys; repeatable")
	replicas := fs.Int("replicas", 1, "sessions that split each batch between them; the batch size must divide by it")
	sessions := fs.Int("sessions", 0, sessionsHelp)
	prefetch := fs.Int("prefetch", -1, "batches the input side may read ahead of the device (-1: one file read's worth and two more)")
	partRows := fs.Int("part-rows", 1<<18, "rows per durable part: the most a killed job redoes")
	resume := fs.Bool("resume", false, "continue an interrupted run of the same job")
	overwrite := fs.Bool("overwrite", false, "replace an existing output (and any interrupted run's parts)")
	breakLock := fs.Bool("break-lock", false, "take over the lock a job that died left on an output on object storage")
	statsJSON := fs.String("stats-json", "", "write the run's statistics to this JSON file")
	sq := defaultSequenceFlags()
	sq.add(fs, true)
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		switch {
		case *modelPath == "":
			return usageError(fmt.Errorf("predict: --model is required"))
		case len(in.inputs) == 0:
			return usageError(fmt.Errorf("predict: --input is required"))
		case *output == "":
			return usageError(fmt.Errorf("predict: --output is required"))
		}
		if *partRows < 1 {
			return usageError(fmt.Errorf("predict: --part-rows %d: want 1 or more", *partRows))
		}
		for _, k := range keep {
			for _, pat := range in.features {
				if ok, _ := path.Match(pat, k); ok {
					return fmt.Errorf("predict: --keep %s matches --features %q: a column goes into the feature tensor or beside the predictions, not both", k, pat)
				}
			}
		}
		_, shard, err := in.options()
		if err != nil {
			return err
		}
		if err := in.checkWrites(*overwrite || *resume, [2]string{"--set-aside", in.setAside}, [2]string{"--stats-json", *statsJSON}); err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		sq.maxMemory = int64(in.maxMemory)
		m, err := loadModel(*modelPath, in.featureCol, sq)
		if err != nil {
			return err
		}
		if err := sq.check(c.Flags(), m); err != nil {
			return usageError(fmt.Errorf("predict: %w", err))
		}
		column := in.featureCol
		if column == "" {
			column = m.feature
		}
		if column == "" {
			column = cpu.DefaultFeature
		}
		cfg := job.Config{
			Inputs: in.inputs, Output: *output,
			Model: m.model, ModelID: m.id, InputSize: m.inputSize,
			FeatureColumn: column, FeatureNamed: "--feature-column", Gather: in.features, Keep: keep,
			BatchSize: *batch, PartRows: *partRows, ReadRows: in.readRows, Shard: shard,
			Overwrite: *overwrite, Resume: *resume, BreakLock: *breakLock,
			Prefetch: *prefetch, MaxMemory: int64(in.maxMemory), CSVSample: in.csvSample, SetAside: in.setAside,
			Predict: []predict.Option{predict.WithReplicas(*replicas), predict.WithGroups(cmp.Or(*sessions, m.sessions))},
			Logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
		if m.seq != nil {
			m.sequenceJob(&cfg)
			if !in.quiet {
				fmt.Fprint(stderr, describeShapes(m.seq))
			}
		}
		prog := in.progress(stderr, "predicting")
		if prog != nil {
			cfg.Progress = prog.update
		}
		tp, stopTraces, err := traces(ctx, cfg.Logger)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		defer stopTraces()
		if tp != nil {
			cfg.TracerProvider = tp
		}
		run := job.Run
		if c.Flags().Changed("shard") && job.IsFolder(*output) {
			// Processes given --shard i/n share the folder: each commits
			// the units u ≡ i (mod n), and the last one seals it.
			if *breakLock {
				return usageError(errors.New("predict: --break-lock: a folder --shard processes share has no lock (a unit's conditional commit is its lock)"))
			}
			if in.setAside != "" && !job.IsFolder(in.setAside) {
				return usageError(fmt.Errorf("predict: --set-aside %s: with --shard and a folder output, a folder (a trailing /) that holds a file a unit", in.setAside))
			}
			run = job.RunUnits
			cfg.Committed = func(u job.Unit, s *job.Summary) {
				fmt.Fprintf(stdout, "committed %s: rows=%d set_aside=%d\n", u.Name(), s.Rows, s.RowsSetAside)
			}
		}
		sum, err := run(ctx, cfg)
		if prog != nil {
			prog.finish()
		}
		switch {
		case errors.Is(err, job.ErrInterrupted):
			return fmt.Errorf("%w: run again with --resume to continue it, or --overwrite to start over", err)
		case errors.Is(err, job.ErrOutputExists):
			return fmt.Errorf("%w: --overwrite replaces it", err)
		case err != nil:
			return err
		}
		printSummary(stdout, sum)
		var seqStats *seq.Stats
		if m.seq != nil {
			st := m.seq.Stats()
			st.Truncated += m.cut.Load() // texts cut by the tokenizer, before the model
			seqStats = &st
			printSequenceStats(stdout, st)
		}
		if *statsJSON != "" {
			return writeStats(*statsJSON, sum, seqStats)
		}
		return nil
	}
	return c
}

func printSummary(w io.Writer, s *job.Summary) {
	if s.AlreadyComplete {
		fmt.Fprintf(w, "%s is complete already (rows=%d): nothing to do\n", s.Output, s.Rows)
		return
	}
	fmt.Fprintf(w, "wrote %s: rows=%d batches=%d padded=%d wall=%s rows/s=%.0f",
		s.Output, s.Rows, s.Batches, s.PaddedRows, s.Wall.Round(time.Millisecond), s.RowsPerSecond)
	if s.RowsSetAside > 0 {
		fmt.Fprintf(w, " set_aside=%d", s.RowsSetAside)
	}
	if s.ResumedRows > 0 {
		fmt.Fprintf(w, " resumed_from=%d", s.ResumedRows)
	}
	if u := s.Units; u != nil {
		fmt.Fprintf(w, " units=%d written=%d skipped=%d taken=%d pending=%d", u.Total, u.Written, u.Skipped, u.Taken, u.Pending)
		if u.Sealed {
			fmt.Fprint(w, " complete")
		}
	}
	fmt.Fprintln(w)
}

// stats is the --stats-json document.
type stats struct {
	*job.Summary
	WallSeconds         float64 `json:"wall_seconds"`
	InputWaitSeconds    float64 `json:"input_wait_seconds"`
	DeviceSeconds       float64 `json:"device_seconds"`
	ConsumerWaitSeconds float64 `json:"consumer_wait_seconds"`
	PaddingWaste        float64 `json:"padding_waste"`
	// Sequence is a sequence model's: tokens, padding and shapes.
	Sequence *seqStatsDoc `json:"sequence,omitempty"`
}

func writeStats(path string, s *job.Summary, sq *seq.Stats) error {
	doc := stats{Summary: s, Sequence: sequenceStats(sq), WallSeconds: s.Wall.Seconds(), InputWaitSeconds: s.Stats.InputWait.Seconds(),
		DeviceSeconds: s.Stats.DeviceTime.Seconds(), ConsumerWaitSeconds: s.Stats.ConsumerWait.Seconds(),
		PaddingWaste: s.Stats.PaddingWaste()}
	if sq != nil {
		// A sequence model's padding is its token slots that ran padded;
		// its windows are not padded.
		doc.PaddingWaste = sq.PaddingWaste()
	}
	if err := writeJSONFile(path, doc); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	return nil
}
