//go:build onnx

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/seq"
)

// seqMemory is what one sequence session holds (KB of resident memory,
// from /proc/self/status): before the session, after the largest
// declared shape has run once, after every declared shape has run, and
// the peak.
type seqMemory struct {
	Before, Largest, All, Peak float64
	Shapes                     int
}

// probeSeqMemory runs one ONNX sequence session (one thread) of the
// model at path: the largest declared shape (default buckets to 512, the
// default budget), then every declared shape, largest first, in a fresh
// process (-seq-memory) so that nothing else this program holds counts.
// It prints a seqMemory as JSON.
func probeSeqMemory(path string) {
	eng, err := onnx.OpenSequence(path, onnx.WithIntraOpThreads(1))
	check(err)
	m, err := seq.New(eng, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(seqMaxLen)}))
	check(err)
	shapes := m.Shapes()
	var res seqMemory
	res.Shapes = len(shapes)
	res.Before = procStatus("VmRSS")
	s, err := eng.Start(context.Background(), seq.EngineConfig{Shapes: shapes, Replicas: 1, Sessions: 1})
	check(err)
	largest := shapes[0]
	for _, sh := range shapes {
		if sh.Rows*sh.Tokens > largest.Rows*largest.Tokens || (sh.Rows*sh.Tokens == largest.Rows*largest.Tokens && sh.Tokens > largest.Tokens) {
			largest = sh
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	run := func(sh seq.Shape) {
		n := sh.Rows * sh.Tokens
		b := &seq.Batch{Shape: sh, IDs: make([]int64, n), Mask: make([]int64, n), TypeIDs: make([]int64, n), Positions: make([]int64, n)}
		for i := range n {
			b.IDs[i], b.Mask[i], b.Positions[i] = int64(1000+rng.IntN(29000)), 1, int64(i%sh.Tokens)
		}
		_, err := s.Run(context.Background(), b)
		check(err)
	}
	run(largest)
	res.Largest = procStatus("VmRSS")
	for _, sh := range shapes {
		run(sh)
	}
	res.All = procStatus("VmRSS")
	res.Peak = procStatus("VmHWM")
	check(s.Shutdown(context.Background()))
	out, err := json.Marshal(res)
	check(err)
	fmt.Println(string(out))
}

// procStatus reads a KB field of /proc/self/status.
func procStatus(field string) float64 {
	f, err := os.Open("/proc/self/status")
	check(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			check(err)
			return kb
		}
	}
	log.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// measureSeqMemory runs probeSeqMemory in a fresh process.
func measureSeqMemory(model string) seqMemory {
	self, err := os.Executable()
	check(err)
	out, err := exec.Command(self, "-seq-memory", model).Output()
	if err != nil {
		log.Fatalf("-seq-memory %s: %v", model, err)
	}
	var m seqMemory
	check(json.Unmarshal(out, &m))
	return m
}

// seqMemoryGoals hold a session's memory at real sizes (MiniLM, 6 × 384;
// BERT base, 12 × 768; random weights, exported by PyTorch here) to the
// largest declared shape: once every shape has run it holds no more than
// after the largest alone (the output arena and ONNX Runtime's arena
// are sized by the largest), and its peak is at most 1.5 times its
// weights and the largest shape's activations (what the first run of
// the largest shape added).
func seqMemoryGoals(c *config) []goal {
	if exec.Command("/usr/bin/python3", "-c", "import torch, onnx").Run() != nil {
		fmt.Println("the sequence memory goals are skipped: no PyTorch (python3-torch, python3-onnx) to export their encoders")
		return nil
	}
	gs := []goal{{"sequences (ONNX, MiniLM-sized (6 × 384)): largest |drainpipe − PyTorch| of an embedding element, 256 texts, in millionths", atMost(10), func(int) float64 {
		return 1e6 * sizedAccuracy(c, 384, 12, 6, 1536)
	}}}
	for _, size := range []struct {
		name                       string
		hidden, heads, layers, ffn int
	}{{"MiniLM-sized (6 × 384)", 384, 12, 6, 1536}, {"base-sized (12 × 768)", 768, 12, 12, 3072}} {
		model := filepath.Join(c.dir, fmt.Sprintf("encoder-%d", size.hidden), "model.onnx")
		var m *seqMemory
		export := func() { exportEncoder(c, size.hidden, size.heads, size.layers, size.ffn) }
		measure := func() seqMemory {
			if m == nil {
				export()
				v := measureSeqMemory(model)
				m = &v
			}
			return *m
		}
		gs = append(gs,
			goal{"sequences (ONNX, " + size.name + "): a session's RSS after every declared shape ÷ after the largest alone", atMost(1.1), func(int) float64 {
				v := measure()
				return (v.All - v.Before) / (v.Largest - v.Before)
			}},
			goal{"sequences (ONNX, " + size.name + "): a session's peak RSS ÷ (its weights + the largest shape's activations)", atMost(1.5), func(int) float64 {
				v := measure()
				return (v.Peak - v.Before) / (v.Largest - v.Before)
			}},
			goal{"sequences (ONNX, " + size.name + "): peak RSS of a text job with a 16 MB row ÷ with that row cut to 16 KB (1 session)", atMost(1.1), func(int) float64 {
				export()
				return longRowRSS(c, model, size.hidden)
			}},
			goal{"sequences (ONNX, " + size.name + "): system CPU ÷ user CPU of a text job", atMost(0.1), func(int) float64 {
				export()
				return textJobCPU(c, model, size.hidden)
			}})
	}
	return gs
}

// exportEncoder returns the ONNX file of an encoder of the given sizes
// (random weights, the test encoder's vocabulary), exported by PyTorch
// into the run's folder on first use.
func exportEncoder(c *config, hidden, heads, layers, ffn int) string {
	dir := filepath.Join(c.dir, fmt.Sprintf("encoder-%d", hidden))
	model := filepath.Join(dir, "model.onnx")
	if _, err := os.Stat(model); err != nil {
		args := []string{"scripts/make-seq-encoder.py", "--out", dir, "--vocab", "30005", "--hidden", strconv.Itoa(hidden),
			"--heads", strconv.Itoa(heads), "--layers", strconv.Itoa(layers), "--ffn", strconv.Itoa(ffn)}
		if out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput(); err != nil {
			log.Fatalf("make-seq-encoder: %v\n%s", err, out)
		}
	}
	return model
}
