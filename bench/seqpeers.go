//go:build onnx

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// transformersJS is the npm package of the transformers.js peer (on
// onnxruntime-node, the ONNX Runtime peer).
const transformersJS = "@huggingface/transformers@4.3.2"

// Texts and batch of the embedding peers: enough batches of the long
// tail that loading the model is a small part of each side's CPU.
const (
	peerTexts = 2048
	peerBatch = 32
)

// embeddingPeerGoals hold drainpipe's text job (`predict --model DIR
// --text-column`, a sentence-transformers folder: mean pooling,
// Normalize) against what a user would run instead, on the same
// MiniLM-sized encoder (6 × 384; random weights, exported by PyTorch
// here) and long-tail texts, every core: transformers.js's
// feature-extraction pipeline, and ONNX Runtime for node called directly
// on batches padded to their longest in input order
// (scripts/embedding-peers.mjs). Each side is a process of its own,
// measured by its CPU (user and system, loading included) a row. A third
// goal holds the job to the encoder alone on its own plan
// (seqjobalone.go).
func embeddingPeerGoals(c *config) []goal {
	if exec.Command("/usr/bin/python3", "-c", "import torch, onnx").Run() != nil {
		fmt.Println("the embedding peer goals are skipped: no PyTorch (python3-torch, python3-onnx) to export their encoder")
		return nil
	}
	var p *embeddingPeers
	setup := func() *embeddingPeers {
		if p == nil {
			p = newEmbeddingPeers(c)
		}
		return p
	}
	name := fmt.Sprintf("embeddings (MiniLM-sized (6 × 384), %d cores, %d long-tail texts): CPU a row, ", runtime.GOMAXPROCS(0), peerTexts)
	return []goal{
		{name + fmt.Sprintf("transformers.js (feature-extraction, mean, normalize, batches of %d in input order) ÷ drainpipe's text job", peerBatch), atLeast(3), func(r int) float64 {
			p := setup()
			theirs, ours := pair(r, func() float64 { return p.peer("transformers.js") }, p.drainpipe)
			return theirs / ours
		}},
		{name + fmt.Sprintf("ONNX Runtime for node on batches of %d padded to their longest ÷ drainpipe's text job", peerBatch), atLeast(3), func(r int) float64 {
			p := setup()
			theirs, ours := pair(r, func() float64 { return p.peer("onnxruntime") }, p.drainpipe)
			return theirs / ours
		}},
		{fmt.Sprintf("embeddings (MiniLM-sized (6 × 384), %d cores, %d long-tail texts): drainpipe's text job ÷ the model alone on its plan's sub-batches", runtime.GOMAXPROCS(0), jobTexts), atLeast(0.95), func(r int) float64 {
			return setup().embeddingJobVsModel(r)
		}},
	}
}

// embeddingPeers is what the embedding peer goals run: the encoder's
// folders, the texts (in Parquet for drainpipe) and the peers' requests.
type embeddingPeers struct {
	c          *config
	folder     string // sentence-transformers, for drainpipe
	input, out string
	modules    string // node_modules holding transformers.js and onnxruntime-node
	requests   map[string]string
	texts      int

	// The job ÷ the model alone (seqjobalone.go): its input, the
	// encoder, its shapes and the sub-batches of its plan.
	jobInput string
	engine   seq.Engine
	shapes   []seq.Shape
	alone    []*seq.Batch
}

func newEmbeddingPeers(c *config) *embeddingPeers {
	modules, err := testbin.NPM(context.Background(), "huggingface-transformers-4.3.2", transformersJS)
	if err != nil {
		log.Fatalf("the embedding peer goals need transformers.js: %v", err)
	}
	model := exportEncoder(c, 384, 12, 6, 1536)
	texts := longTailTexts(peerTexts)
	tok, err := tokenizer.LoadFile("tokenizer/testdata/bert-uncased.json")
	check(err)
	ids := make([][]int, len(texts))
	for i, t := range texts {
		e, err := tok.Encode(t)
		check(err)
		for _, id := range e.IDs[:min(len(e.IDs), seqMaxLen)] {
			ids[i] = append(ids[i], int(id))
		}
	}
	dir := filepath.Join(c.dir, "embedding-peers")
	p := &embeddingPeers{c: c, folder: stFolder(filepath.Join(dir, "st"), model), input: filepath.Join(dir, "texts.parquet"),
		out: filepath.Join(dir, "embeddings.parquet"), modules: filepath.Join(modules, "node_modules"), texts: len(texts),
		requests: map[string]string{}}
	writeParquet(p.input, textDataset(c, texts), c.mem)
	threads := runtime.GOMAXPROCS(0)
	for peer, req := range map[string]map[string]any{
		"transformers.js": {"root": jsLayout(filepath.Join(dir, "js"), "minilm", model), "model": "minilm", "texts": texts},
		"onnxruntime":     {"onnx": model, "ids": ids},
	} {
		req["peer"], req["batch"], req["threads"] = peer, peerBatch, threads
		data, err := json.Marshal(req)
		check(err)
		p.requests[peer] = filepath.Join(dir, peer+".json")
		check(os.WriteFile(p.requests[peer], data, 0o644))
	}
	return p
}

// drainpipe runs the text job and returns its CPU seconds a row.
func (p *embeddingPeers) drainpipe() float64 {
	cmd := exec.Command(seqBinary(p.c), "predict", "--model", p.folder, "--text-column", "text", "--input", p.input,
		"--output", p.out, "--overwrite", "--quiet")
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("text job: %v\n%s", err, out)
	}
	ds, err := fileset.Read([]string{p.out})
	check(err)
	if n, err := ds.Count(); err != nil || n != int64(p.texts) {
		log.Fatalf("text job: %d rows of %d texts (%v)", n, p.texts, err)
	}
	return childCPU(cmd) / float64(p.texts)
}

// peer runs a peer and returns its CPU seconds a row.
func (p *embeddingPeers) peer(name string) float64 {
	cmd := exec.Command("node", "scripts/embedding-peers.mjs", p.modules, p.requests[name])
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("%s: %v\n%s", name, err, stderrOf(err))
	}
	var got struct{ Rows, Width int }
	if err := json.Unmarshal(out, &got); err != nil || got.Rows != p.texts || got.Width != 384 {
		log.Fatalf("%s: %s: want %d rows of 384 (%v)", name, out, p.texts, err)
	}
	return childCPU(cmd) / float64(p.texts)
}

// childCPU is the user and system CPU seconds of a command that ran.
func childCPU(cmd *exec.Cmd) float64 {
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func stderrOf(err error) string {
	if e, ok := err.(*exec.ExitError); ok {
		return string(e.Stderr)
	}
	return ""
}

// stFolder lays the encoder out as a sentence-transformers folder in dir:
// the model, its WordPiece tokenizer, mean pooling and Normalize, 512
// tokens a text.
func stFolder(dir, model string) string {
	files := map[string]any{
		"config.json":               encoderConfig(384),
		"tokenizer_config.json":     map[string]any{"model_max_length": seqMaxLen},
		"sentence_bert_config.json": map[string]any{"max_seq_length": seqMaxLen},
		"modules.json": []map[string]any{
			{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
			{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
			{"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
		},
		"1_Pooling/config.json": map[string]any{"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true},
	}
	layOut(dir, model, "model.onnx", files)
	check(os.MkdirAll(filepath.Join(dir, "2_Normalize"), 0o755))
	return dir
}

// jsLayout lays the encoder out as transformers.js reads a model folder,
// root/name: onnx/model.onnx, and the pad token and length in
// tokenizer_config.json. It returns root.
func jsLayout(root, name, model string) string {
	layOut(filepath.Join(root, name), model, filepath.Join("onnx", "model.onnx"), map[string]any{
		"config.json":           encoderConfig(384),
		"tokenizer_config.json": map[string]any{"pad_token": "[PAD]", "model_max_length": seqMaxLen},
	})
	return root
}
