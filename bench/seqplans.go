package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"

	"github.com/drainpipe/drainpipe/seq"
)

// The sequence goals' rows: token lengths of a long-tail distribution
// (median 14, p99 ≈ 640), cut at a BERT's 512 positions.
const (
	seqLengths = "seq/testdata/lengths.txt"
	seqMaxLen  = 512
	seqWindow  = 4096
)

func readLengths() []int {
	f, err := os.Open(seqLengths)
	check(err)
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		check(err)
		out = append(out, min(n, seqMaxLen))
	}
	check(sc.Err())
	return out
}

// The strategies the sequence goals compare drainpipe's plan with, as
// plans (seq.WithPlan) run by the same model and session.

// inputOrder is what a plain loop does (Hugging Face pipelines, Spark
// UDFs): batches of rows rows in input order, padded to their longest.
func inputOrder(rows int) func([]int) ([]seq.SubBatch, error) {
	return func(lengths []int) ([]seq.SubBatch, error) {
		var out []seq.SubBatch
		for i := 0; i < len(lengths); i += rows {
			idx := rowRange(i, min(i+rows, len(lengths)))
			out = append(out, seq.SubBatch{Shape: seq.Shape{Rows: len(idx), Tokens: longest(lengths, idx)}, Rows: idx})
		}
		return out, nil
	}
}

// fifoBudget is Text Embeddings Inference's batching: rows in arrival
// order while their real tokens fit the budget, padded to their longest.
func fifoBudget(budget int) func([]int) ([]seq.SubBatch, error) {
	return func(lengths []int) ([]seq.SubBatch, error) {
		var out []seq.SubBatch
		for i := 0; i < len(lengths); {
			j, tokens := i, 0
			for j < len(lengths) && (j == i || tokens+max(lengths[j], 1) <= budget) {
				tokens += max(lengths[j], 1)
				j++
			}
			idx := rowRange(i, j)
			out = append(out, seq.SubBatch{Shape: seq.Shape{Rows: len(idx), Tokens: longest(lengths, idx)}, Rows: idx})
			i = j
		}
		return out, nil
	}
}

func rowRange(from, to int) []int {
	out := make([]int, to-from)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func longest(lengths []int, rows []int) int {
	n := 1
	for _, r := range rows {
		n = max(n, lengths[r])
	}
	return n
}

// slotWaste returns the fraction of token slots a plan of lengths (in
// windows of window rows) fills with padding.
func slotWaste(lengths []int, window int, plan func([]int) ([]seq.SubBatch, error)) float64 {
	var real, slots int
	for start := 0; start < len(lengths); start += window {
		win := lengths[start:min(start+window, len(lengths))]
		subs, err := plan(win)
		check(err)
		for _, sb := range subs {
			slots += sb.Shape.Slots()
			for _, r := range sb.Rows {
				real += win[r]
			}
		}
	}
	return 1 - float64(real)/float64(slots)
}

// seqWasteGoals are the padding waste of drainpipe's plans on the
// committed distribution, measured with no model: the same each round.
func seqWasteGoals() []goal {
	lengths := readLengths()
	buckets := seq.Planner{Buckets: seq.DefaultBuckets(seqMaxLen)}
	none := seq.Planner{MaxLength: seqMaxLen}
	fixed := func(v float64) func(int) float64 { return func(int) float64 { return v } }
	budget := func(int) float64 {
		// The largest sub-batch of the default plan ÷ the budget: a row
		// over it alone may run alone (none does here: 512 tokens × 32 rows
		// is the budget).
		peak := 0
		for start := 0; start < len(lengths); start += seqWindow {
			subs, err := buckets.Plan(lengths[start:min(start+seqWindow, len(lengths))])
			check(err)
			for _, sb := range subs {
				peak = max(peak, sb.Shape.Slots())
			}
		}
		return float64(peak) / seq.DefaultMaxTokens
	}
	return []goal{
		{"sequences: the largest sub-batch ÷ --max-batch-tokens, default buckets", atMost(1), budget},
		{fmt.Sprintf("sequences: padding waste, default buckets, window %d (input order ×32: %.3f)", seqWindow, slotWaste(lengths, len(lengths), inputOrder(32))),
			atMost(0.15), fixed(slotWaste(lengths, seqWindow, buckets.Plan))},
		{fmt.Sprintf("sequences: padding waste, --seq-buckets none, window %d (FIFO token budget: %.3f)", seqWindow, slotWaste(lengths, len(lengths), fifoBudget(seq.DefaultMaxTokens))),
			atMost(0.05), fixed(slotWaste(lengths, seqWindow, none.Plan))},
	}
}
