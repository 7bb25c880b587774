package hfmodel

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

var (
	// ErrUnsupported reports a part of a folder drainpipe does not run:
	// a module, an activation, a setting. It is named, never skipped.
	ErrUnsupported = errors.New("hfmodel: not supported")
	// ErrFolder reports a folder whose files contradict each other or
	// cannot be read as their library reads them.
	ErrFolder = errors.New("hfmodel: bad model folder")
)

// DefaultMaxLength is the length a folder that says none gets.
const DefaultMaxLength = 512

// Folder is a model folder as sentence-transformers and transformers
// lay it out and read it.
type Folder struct {
	Dir  string
	ONNX string // onnx/model.onnx or model.onnx
	// ModelType is config.json's model_type.
	ModelType string
	PadID     int64
	Vocab     int64 // vocab_size: ids at or past it are row errors
	// MaxLength is the tokens a text keeps, special tokens included:
	// sentence_bert_config.json's max_seq_length, else
	// tokenizer_config.json's model_max_length, else the positions the
	// model has; never more than those positions (PositionLimit).
	MaxLength int
	// PositionLimit is the longest sequence the model's position
	// embeddings take: max_position_embeddings, less PositionStart in
	// RoBERTa's family; 0 when config.json does not say.
	PositionLimit int
	// PositionStart is the first real token's position id: padding_idx
	// + 1 in RoBERTa's family (RoBERTa, XLM-R, CamemBERT, MPNet, …),
	// else 0.
	PositionStart int64
	LeftPadding   bool // tokenizer_config.json's padding_side
	// Poolings are the Pooling module's modes in its order, nil when the
	// folder declares none.
	Poolings []seq.Pooling
	// Modules are the modules after pooling, in the stack's order.
	Modules []seq.Module
	// Head reads a classifier's logits as the pipelines do.
	Head head.Head
	// Tokenizer is tokenizer.json with its truncation set to MaxLength
	// (nil if the folder has none).
	Tokenizer *tokenizer.Tokenizer
	// Digest is a SHA-256 of every file read but the ONNX model.
	Digest string

	truncateLeft bool // tokenizer_config.json's truncation_side
	stLength     int  // sentence_bert_config.json's max_seq_length
	tokLength    int  // tokenizer_config.json's model_max_length
}

// robertaFamily are the model types whose position ids count from
// padding_idx + 1 (transformers' create_position_ids_from_input_ids).
var robertaFamily = []string{"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text", "longformer", "xmod", "roberta-prelayernorm", "ibert", "luke", "markuplm"}

// ModelFile returns the ONNX file of a model folder: onnx/model.onnx or
// model.onnx.
func ModelFile(dir string) (string, error) {
	for _, name := range []string{filepath.Join("onnx", "model.onnx"), "model.onnx"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("%w: %s has no onnx/model.onnx or model.onnx", ErrFolder, dir)
}

// FolderOf returns the folder an ONNX file's configuration is read
// from: its own, or the one above an onnx/ folder.
func FolderOf(onnxFile string) string {
	dir := filepath.Dir(onnxFile)
	if filepath.Base(dir) == "onnx" {
		return filepath.Dir(dir)
	}
	return dir
}

// reader reads a folder's JSON files into a digest.
type reader struct {
	dir string
	h   hash.Hash
}

// json reads name into v; a missing file is false, not an error.
func (r *reader) json(name string, v any) (bool, error) {
	data, err := r.bytes(name)
	if data == nil || err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrFolder, filepath.Join(r.dir, name), err)
	}
	return true, nil
}

// bytes reads name, nil if it is missing.
func (r *reader) bytes(name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(r.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	io.WriteString(r.h, name+"\x00"+strconv.Itoa(len(data))+"\x00")
	r.h.Write(data)
	return data, nil
}

// hash adds files to the digest.
func (r *reader) hash(names ...string) error {
	for _, name := range names {
		if _, err := r.bytes(name); err != nil {
			return err
		}
	}
	return nil
}

// Open reads a model folder (or the folder of an ONNX file, with that
// file as its model). Missing files leave defaults; a file that does not
// parse, a module drainpipe does not run, or a setting it cannot honour
// is an error naming it.
func Open(path string) (*Folder, error) {
	f := &Folder{}
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.IsDir() {
		f.Dir = path
		if f.ONNX, err = ModelFile(path); err != nil {
			return nil, err
		}
	} else {
		f.Dir, f.ONNX = FolderOf(path), path
	}
	r := &reader{dir: f.Dir, h: sha256.New()}
	if err := f.readConfig(r); err != nil {
		return nil, err
	}
	if err := f.readModules(r); err != nil {
		return nil, err
	}
	if err := f.readTokenizer(r); err != nil {
		return nil, err
	}
	f.Digest = hex.EncodeToString(r.h.Sum(nil))
	return f, nil
}

// readConfig reads config.json and tokenizer_config.json.
func (f *Folder) readConfig(r *reader) error {
	var config struct {
		ModelType    string            `json:"model_type"`
		PadTokenID   *int64            `json:"pad_token_id"`
		ID2Label     map[string]string `json:"id2label"`
		NumLabels    int               `json:"num_labels"`
		ProblemType  string            `json:"problem_type"`
		MaxPositions int               `json:"max_position_embeddings"`
		VocabSize    int64             `json:"vocab_size"`
		// A sentence-transformers CrossEncoder's activation.
		ST struct {
			Activation string `json:"activation_fn"`
		} `json:"sentence_transformers"`
		LegacyActivation string `json:"sbert_ce_default_activation_function"`
	}
	if _, err := r.json("config.json", &config); err != nil {
		return err
	}
	f.ModelType, f.Vocab = config.ModelType, config.VocabSize
	if config.PadTokenID != nil {
		f.PadID = *config.PadTokenID
	}
	if slices.Contains(robertaFamily, config.ModelType) {
		f.PositionStart = f.PadID + 1
	}
	if config.MaxPositions > 0 {
		f.PositionLimit = config.MaxPositions - int(f.PositionStart)
		if f.PositionLimit < 1 {
			return fmt.Errorf("%w: config.json: max_position_embeddings %d leaves no position after padding_idx %d", ErrFolder, config.MaxPositions, f.PadID)
		}
	}
	labels, err := labelsOf(config.ID2Label)
	if err != nil {
		return err
	}
	f.Head = head.Head{Labels: labels, Function: head.Pick(max(config.NumLabels, len(labels)), config.ProblemType)}
	switch act := cmp.Or(config.ST.Activation, config.LegacyActivation); act {
	case "":
	case "torch.nn.modules.activation.Sigmoid":
		f.Head.Function = head.Sigmoid
	case "torch.nn.modules.linear.Identity":
		f.Head.Function = head.None
	default:
		return fmt.Errorf("%w: config.json: cross-encoder activation %q (drainpipe has Sigmoid and Identity)", ErrUnsupported, act)
	}
	var tok struct {
		MaxLength      float64 `json:"model_max_length"` // some say 1e30: no limit
		PaddingSide    string  `json:"padding_side"`
		TruncationSide string  `json:"truncation_side"`
	}
	if _, err := r.json("tokenizer_config.json", &tok); err != nil {
		return err
	}
	f.LeftPadding = tok.PaddingSide == "left"
	f.truncateLeft = tok.TruncationSide == "left"
	if tok.MaxLength > 0 && tok.MaxLength < 1<<20 {
		f.tokLength = int(tok.MaxLength)
	}
	return nil
}

// labelsOf returns id2label's names in id order; the ids must be 0…n−1.
func labelsOf(id2label map[string]string) ([]string, error) {
	ids := make([]int, 0, len(id2label))
	for k := range id2label {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("%w: config.json: id2label key %q is not a number", ErrFolder, k)
		}
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var out []string
	for i, id := range ids {
		if id != i {
			return nil, fmt.Errorf("%w: config.json: id2label has ids %v, want 0 to %d", ErrFolder, ids, len(ids)-1)
		}
		out = append(out, id2label[strconv.Itoa(id)])
	}
	return out, nil
}
