package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drainpipe/drainpipe/device/cpu"
)

// goalRun is how --goals runs and reports.
type goalRun struct {
	rounds   int
	only     string
	onnxOnly bool // the ONNX Runtime goals alone
	markdown bool // a Markdown table, a row a goal, for BENCHMARKS.md
}

// measured is a goal's ratios over the rounds, sorted.
type measured struct {
	goal   goal
	ratios []float64
}

func (m measured) median() float64 { return m.ratios[len(m.ratios)/2] }

func (m measured) met() string {
	switch {
	case m.goal.target.line:
		return "-"
	case m.goal.target.met(m.median()):
		return "yes"
	}
	return "no"
}

// report writes the goals measured: a table for the terminal, or with
// markdown one BENCHMARKS.md keeps, with the machine, the date and the
// command that measures each goal again.
func (c *config) report(w io.Writer, run goalRun, ms []measured) {
	cores := runtime.GOMAXPROCS(0)
	date := time.Now().UTC().Format("2006-01-02")
	if !run.markdown {
		fmt.Fprintf(w, "speed goals: %d rows, batch %d, BLAS %s, GOMAXPROCS %d, %d interleaved rounds, %s\n\n",
			c.rows, c.batch, cpu.BLASName, cores, run.rounds, date)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "goal\ttarget\tmedian\tlowest\thighest\tmet\t")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t\n", m.goal.name, m.goal.target, m.median(), m.ratios[0], m.ratios[len(m.ratios)-1], m.met())
		}
		tw.Flush()
		if os.Getenv("OPENBLAS_NUM_THREADS") == "" && cpu.BLASName != "gonum (pure Go)" {
			fmt.Fprintln(w, "\n(OPENBLAS_NUM_THREADS is unset: the kernel goal is stated for one BLAS thread)")
		}
		return
	}
	machine := fmt.Sprintf("%s/%s, %d cores, BLAS %s", runtime.GOOS, runtime.GOARCH, cores, cpu.BLASName)
	fmt.Fprintln(w, "| goal | target | median (lowest–highest) | met | measured on | command |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, m := range ms {
		cmd := fmt.Sprintf("go run %s./bench --goals --rows %d --rounds %d --only %q", buildTags(), c.rows, run.rounds, m.goal.name)
		fmt.Fprintf(w, "| %s | %s | %.3f (%.3f–%.3f) | %s | %s, %s | `%s` |\n", escapePipes(m.goal.name), escapePipes(m.goal.target.String()),
			m.median(), m.ratios[0], m.ratios[len(m.ratios)-1], m.met(), machine, date, escapePipes(cmd))
	}
}

// measure runs the goals' rounds, interleaved.
func measure(gs []goal, rounds int) []measured {
	ms := make([]measured, len(gs))
	for i, g := range gs {
		ms[i].goal = g
	}
	for r := range rounds {
		for i, g := range gs {
			ms[i].ratios = append(ms[i].ratios, g.round(r))
		}
	}
	for i := range ms {
		slices.Sort(ms[i].ratios)
	}
	return ms
}

// buildTags is the -tags flag of this build, as a command repeats it.
func buildTags() string {
	var tags []string
	if cpu.BLASName != "gonum (pure Go)" {
		tags = append(tags, "openblas")
	}
	if onnxBuilt {
		tags = append(tags, "onnx")
	}
	if len(tags) == 0 {
		return ""
	}
	return "-tags " + strings.Join(tags, ",") + " "
}

func escapePipes(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
