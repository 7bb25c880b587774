//go:build onnx

package main

import (
	"context"
	"log"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// jobTexts is the corpus of the embedding job ÷ the model alone: long
// enough that the job's start (loading the model in each session, a
// warm-up run of the largest shape) is a small part of it, as in a real
// job.
const jobTexts = 8000

// jobWindow is `predict`'s default window for a sequence model.
const jobWindow = 4096

// embeddingJobVsModel returns the rate of drainpipe's text job over
// jobTexts long-tail texts (the whole process: reading, tokenizing,
// planning, running, writing) ÷ the rate of the same encoder alone on the
// sub-batches the job's plan makes: its sessions (one a core, one thread
// each, as the job's) fed the padded sub-batches, made beforehand, from a
// queue. r alternates which runs first.
func (p *embeddingPeers) embeddingJobVsModel(r int) float64 {
	if p.alone == nil {
		p.jobInput = filepath.Join(filepath.Dir(p.input), "job-texts.parquet")
		writeParquet(p.jobInput, textDataset(p.c, longTailTexts(jobTexts)), p.c.mem)
		p.alone = p.planBatches()
	}
	alone, job := pair(r, p.runAlone, func() float64 {
		began := time.Now()
		cmd := exec.Command(seqBinary(p.c), "predict", "--model", p.folder, "--text-column", "text", "--input", p.jobInput,
			"--output", p.out, "--overwrite", "--quiet")
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("text job: %v\n%s", err, out)
		}
		return time.Since(began).Seconds()
	})
	return alone / job
}

// planBatches tokenizes the job's texts as the folder does and pads the
// sub-batches its model's planner makes of each window.
func (p *embeddingPeers) planBatches() []*seq.Batch {
	f, err := hfmodel.Open(p.folder)
	check(err)
	eng, err := onnx.OpenSequence(f.ONNX, onnx.WithIntraOpThreads(1))
	check(err)
	_, m, err := f.Model(eng)
	check(err)
	tok, err := tokenizer.LoadFile(filepath.Join(f.Dir, "tokenizer.json"))
	check(err)
	p.engine, p.shapes = eng, m.Shapes()
	texts := longTailTexts(jobTexts)
	var batches []*seq.Batch
	for start := 0; start < len(texts); start += jobWindow {
		window := texts[start:min(start+jobWindow, len(texts))]
		ids := make([][]int64, len(window))
		lengths := make([]int, len(window))
		for i, t := range window {
			e, err := tok.Encode(t)
			check(err)
			ids[i] = e.IDs[:min(len(e.IDs), f.MaxLength)]
			lengths[i] = len(ids[i])
		}
		plan, err := m.Planner().Plan(lengths)
		check(err)
		for _, sb := range plan {
			b := &seq.Batch{Shape: sb.Shape, IDs: make([]int64, sb.Shape.Slots()), Mask: make([]int64, sb.Shape.Slots()),
				TypeIDs: make([]int64, sb.Shape.Slots())}
			for i := range b.IDs {
				b.IDs[i] = f.PadID
			}
			for i, row := range sb.Rows {
				at := i * sb.Shape.Tokens
				copy(b.IDs[at:], ids[row])
				for j := range ids[row] {
					b.Mask[at+j] = 1
				}
			}
			batches = append(batches, b)
		}
	}
	return batches
}

// runAlone runs the planned sub-batches on one engine session a core and
// returns the wall seconds.
func (p *embeddingPeers) runAlone() float64 {
	ctx := context.Background()
	n := runtime.GOMAXPROCS(0)
	queue := make(chan *seq.Batch, len(p.alone))
	for _, b := range p.alone {
		queue <- b
	}
	close(queue)
	sessions := make([]seq.EngineSession, n)
	for i := range sessions {
		s, err := p.engine.Start(ctx, seq.EngineConfig{Shapes: p.shapes, Replicas: 1, Sessions: n})
		check(err)
		sessions[i] = s
	}
	began := time.Now()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			for b := range queue {
				_, err := s.Run(ctx, b)
				check(err)
			}
		})
	}
	wg.Wait()
	took := time.Since(began).Seconds()
	for _, s := range sessions {
		check(s.Shutdown(ctx))
	}
	return took
}
