package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a job's progress: a bar on a terminal, else a log line
// every second for the first ten, then every ten seconds, so a short job
// shows some and a long one does not flood its log.
type progress struct {
	w     io.Writer
	verb  string // "predicting", "reading"
	bar   *progressbar.ProgressBar
	start time.Time
	last  time.Time
	done  int64
}

func newProgress(w io.Writer, verb string) *progress {
	p := &progress{w: w, verb: verb, start: time.Now(), last: time.Now()}
	if isTerminal(w) {
		// Made now, not at the first batch: its rate counts from the
		// job's start (a bar made at the first batch showed that batch's
		// rows over a few microseconds, tens of millions of rows/s).
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(verb),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rows"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
		)
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (p *progress) update(done, total int64) {
	p.done = done
	if p.bar != nil {
		if total > 0 && p.bar.GetMax64() != total {
			p.bar.ChangeMax64(total)
		}
		p.bar.Set64(done)
		return
	}
	every := time.Second
	if time.Since(p.start) > 10*time.Second {
		every = 10 * time.Second
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	rate := float64(done) / time.Since(p.start).Seconds()
	line := fmt.Sprintf("progress: rows=%d rows/s=%.0f", done, rate)
	if total > 0 && rate > 0 {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		line += fmt.Sprintf(" of=%d eta=%s", total, eta.Round(time.Second))
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
