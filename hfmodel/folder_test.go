package hfmodel_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/seq"
)

// folder writes a model folder: files by name (values marshalled to
// JSON, strings and bytes as they are) and an empty model.onnx.
func folder(t *testing.T, files map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	files["model.onnx"] = []byte{}
	for name, v := range files {
		var data []byte
		switch v := v.(type) {
		case []byte:
			data = v
		case string:
			data = []byte(v)
		default:
			var err error
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// safetensors writes tensors (name → shape, values) as a .safetensors file.
func safetensors(tensors map[string][]float32, shapes map[string][]int) []byte {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var body []byte
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range tensors {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		start := len(body)
		for _, v := range tensors[name] {
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(v))
		}
		header[name] = map[string]any{"dtype": "F32", "shape": shapes[name], "data_offsets": []int{start, len(body)}}
	}
	h, _ := json.Marshal(header)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), body...)
}

func stack(types ...string) []map[string]any {
	var out []map[string]any
	paths := map[string]string{"Transformer": "", "Pooling": "1_Pooling", "Dense": "2_Dense", "Normalize": "3_Normalize"}
	for i, ty := range types {
		out = append(out, map[string]any{"idx": i, "name": ty, "path": paths[ty], "type": "sentence_transformers.models." + ty})
	}
	return out
}

func tokenizerJSON(t *testing.T) []byte {
	data, err := os.ReadFile("../tokenizer/testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The length is max_seq_length, else model_max_length, else the
// positions, and never past the positions (RoBERTa's less padding_idx
// + 1); the tokenizer truncates there.
func TestLength(t *testing.T) {
	cases := []struct {
		name   string
		files  map[string]any
		length int
		start  int64
	}{
		{"max_seq_length wins", map[string]any{"config.json": map[string]any{"max_position_embeddings": 512}, "tokenizer_config.json": map[string]any{"model_max_length": 512},
			"modules.json": stack("Transformer", "Pooling"), "sentence_bert_config.json": map[string]any{"max_seq_length": 128}, "1_Pooling/config.json": map[string]any{}}, 128, 0},
		{"model_max_length", map[string]any{"config.json": map[string]any{"max_position_embeddings": 512}, "tokenizer_config.json": map[string]any{"model_max_length": 256}}, 256, 0},
		{"1e30 is no limit", map[string]any{"config.json": map[string]any{"max_position_embeddings": 512}, "tokenizer_config.json": map[string]any{"model_max_length": 1e30}}, 512, 0},
		{"RoBERTa without model_max_length", map[string]any{"config.json": map[string]any{"model_type": "roberta", "pad_token_id": 1, "max_position_embeddings": 514}}, 512, 2},
		{"RoBERTa asking for more than it has", map[string]any{"config.json": map[string]any{"model_type": "xlm-roberta", "pad_token_id": 1, "max_position_embeddings": 514},
			"modules.json": stack("Transformer"), "sentence_bert_config.json": map[string]any{"max_seq_length": 514}}, 512, 2},
		{"nothing said", map[string]any{}, hfmodel.DefaultMaxLength, 0},
	}
	for _, c := range cases {
		c.files["tokenizer.json"] = tokenizerJSON(t)
		f, err := hfmodel.Open(folder(t, c.files))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.MaxLength != c.length || f.PositionStart != c.start || f.Tokenizer.Truncation().MaxLength != c.length {
			t.Errorf("%s: length %d, start %d, truncation %+v; want %d, %d", c.name, f.MaxLength, f.PositionStart, f.Tokenizer.Truncation(), c.length, c.start)
		}
	}
}

// Poolings are read in sentence-transformers' order from the legacy
// flags, in the given order from pooling_mode, mean when none is on.
func TestPoolings(t *testing.T) {
	cases := []struct {
		config map[string]any
		want   []seq.Pooling
	}{
		{map[string]any{"pooling_mode_lasttoken": true, "pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true, "pooling_mode_max_tokens": true}, []seq.Pooling{seq.CLS, seq.Max, seq.Mean, seq.Last}},
		{map[string]any{"pooling_mode": []string{"weightedmean", "cls"}}, []seq.Pooling{seq.WeightedMean, seq.CLS}},
		{map[string]any{"pooling_mode": "mean_sqrt_len_tokens"}, []seq.Pooling{seq.MeanSqrtLen}},
		{map[string]any{"pooling_mode_mean_tokens": false}, []seq.Pooling{seq.Mean}},
	}
	for _, c := range cases {
		f, err := hfmodel.Open(folder(t, map[string]any{"modules.json": stack("Transformer", "Pooling"), "1_Pooling/config.json": c.config}))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.Poolings, c.want) {
			t.Errorf("%v: poolings %v, want %v", c.config, f.Poolings, c.want)
		}
	}
}

// A Dense module is read from model.safetensors and applied as
// nn.Linear then its activation; Normalize follows in the stack's order.
func TestDense(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6} // 2 × 3
	b := []float32{0.5, -1}
	dir := folder(t, map[string]any{
		"modules.json":          stack("Transformer", "Pooling", "Dense", "Normalize"),
		"1_Pooling/config.json": map[string]any{"pooling_mode": "cls"},
		"2_Dense/config.json":   map[string]any{"in_features": 3, "out_features": 2, "bias": true, "activation_function": "torch.nn.modules.linear.Identity"},
		"2_Dense/model.safetensors": safetensors(map[string][]float32{"linear.weight": w, "linear.bias": b},
			map[string][]int{"linear.weight": {2, 3}, "linear.bias": {2}}),
	})
	f, err := hfmodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Modules) != 2 || f.Modules[1] != seq.Module(seq.Normalize{}) {
		t.Fatalf("modules %v", f.Modules)
	}
	out := make([]float32, 2)
	f.Modules[0].Apply(out, []float32{1, 0, -1})
	if want := []float32{1 - 3 + 0.5, 4 - 6 - 1}; !slices.Equal(out, want) {
		t.Fatalf("Dense gives %v, want %v", out, want)
	}
	if _, err := f.Modules[0].OutWidth(4); err == nil {
		t.Fatal("a Dense of 3 inputs took 4")
	}
}

// What drainpipe does not run is refused by name: an unknown module, a
// module out of the stack's order, pickled weights, an activation it has
// not, lowercasing before the tokenizer, a bad id2label.
func TestRefusals(t *testing.T) {
	dense := map[string]any{"in_features": 3, "out_features": 2}
	cases := []struct {
		name  string
		files map[string]any
		err   error
		says  string
	}{
		{"unknown module", map[string]any{"modules.json": append(stack("Transformer", "Pooling"), map[string]any{"idx": 2, "path": "2_LayerNorm", "type": "sentence_transformers.models.LayerNorm"}), "1_Pooling/config.json": map[string]any{}}, hfmodel.ErrUnsupported, "LayerNorm"},
		{"Dense before Pooling", map[string]any{"modules.json": stack("Transformer", "Dense"), "2_Dense/config.json": dense}, hfmodel.ErrUnsupported, "Dense"},
		{"pickled weights", map[string]any{"modules.json": stack("Transformer", "Pooling", "Dense"), "1_Pooling/config.json": map[string]any{}, "2_Dense/config.json": dense, "2_Dense/pytorch_model.bin": "pickle"}, hfmodel.ErrUnsupported, "pytorch_model.bin"},
		{"activation", map[string]any{"modules.json": stack("Transformer", "Pooling", "Dense"), "1_Pooling/config.json": map[string]any{},
			"2_Dense/config.json": map[string]any{"in_features": 3, "out_features": 2, "activation_function": "torch.nn.modules.activation.Softplus"}}, hfmodel.ErrUnsupported, "Softplus"},
		{"do_lower_case", map[string]any{"modules.json": stack("Transformer"), "sentence_bert_config.json": map[string]any{"do_lower_case": true}}, hfmodel.ErrUnsupported, "do_lower_case"},
		{"pooling mode", map[string]any{"modules.json": stack("Transformer", "Pooling"), "1_Pooling/config.json": map[string]any{"pooling_mode": "median"}}, hfmodel.ErrUnsupported, "median"},
		{"id2label", map[string]any{"config.json": map[string]any{"id2label": map[string]string{"0": "a", "2": "c"}}}, hfmodel.ErrFolder, "id2label"},
		{"config.json", map[string]any{"config.json": "{"}, hfmodel.ErrFolder, "config.json"},
	}
	for _, c := range cases {
		_, err := hfmodel.Open(folder(t, c.files))
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v naming %q", c.name, err, c.err, c.says)
		}
	}
}

// The head follows config.json: the pipelines' function, a
// cross-encoder's activation over it, id2label's names in id order.
func TestHead(t *testing.T) {
	cases := []struct {
		config map[string]any
		want   head.Function
		labels []string
	}{
		{map[string]any{"id2label": map[string]string{"1": "pos", "0": "neg"}}, head.Softmax, []string{"neg", "pos"}},
		{map[string]any{"id2label": map[string]string{"0": "LABEL_0"}}, head.Sigmoid, []string{"LABEL_0"}},
		{map[string]any{"num_labels": 4, "problem_type": "multi_label_classification"}, head.Sigmoid, nil},
		{map[string]any{"num_labels": 1, "problem_type": "regression"}, head.None, nil},
		{map[string]any{"num_labels": 1, "sentence_transformers": map[string]any{"activation_fn": "torch.nn.modules.linear.Identity"}}, head.None, nil},
	}
	for _, c := range cases {
		f, err := hfmodel.Open(folder(t, map[string]any{"config.json": c.config}))
		if err != nil {
			t.Fatal(err)
		}
		if f.Head.Function != c.want || !slices.Equal(f.Head.Labels, c.labels) {
			t.Errorf("%v: %s %v, want %s %v", c.config, f.Head.Function, f.Head.Labels, c.want, c.labels)
		}
	}
}
