package hfmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/drainpipe/drainpipe/seq"
)

// Dense is sentence-transformers' Dense module: out = act(W·x + b), plus
// x (or R·x) with use_residual. It is a seq.Module.
type Dense struct {
	In, Out     int
	Weight      []float32 // Out × In, row-major (torch's nn.Linear weight)
	Bias        []float32 // Out values, or nil
	Residual    []float32 // Out × In, or nil (a residual of In == Out adds x)
	UseResidual bool
	Activation  string // the activation's name, as the config gives it
	act         func(float64) float64
}

var _ seq.Module = (*Dense)(nil)

// activations are the torch activations a Dense config names, by their
// class name. sentence-transformers loads one outside torch only with
// trust_remote_code, else it falls back to Tanh: so does this.
var activations = map[string]func(float64) float64{
	"Tanh":     math.Tanh,
	"Identity": func(x float64) float64 { return x },
	"ReLU":     func(x float64) float64 { return max(x, 0) },
	"Sigmoid":  func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"GELU":     func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
	"SiLU":     func(x float64) float64 { return x / (1 + math.Exp(-x)) },
}

// readDense reads a Dense module's folder: config.json and
// model.safetensors (a pytorch_model.bin alone is refused: it is a
// pickle, which drainpipe does not run).
func readDense(dir string) (*Dense, error) {
	var cfg struct {
		In          int     `json:"in_features"`
		Out         int     `json:"out_features"`
		Bias        *bool   `json:"bias"`
		Activation  *string `json:"activation_function"`
		Input       string  `json:"module_input_name"`
		Output      string  `json:"module_output_name"`
		UseResidual bool    `json:"use_residual"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	for _, name := range []string{cfg.Input, cfg.Output} {
		if name != "" && name != "sentence_embedding" {
			return nil, fmt.Errorf("%w: Dense module %s reads or writes %q; drainpipe applies Dense to the sentence embedding only", ErrUnsupported, dir, name)
		}
	}
	if cfg.In <= 0 || cfg.Out <= 0 || cfg.In > 1<<16 || cfg.Out > 1<<16 {
		return nil, fmt.Errorf("%s: in_features %d, out_features %d", dir, cfg.In, cfg.Out)
	}
	d := &Dense{In: cfg.In, Out: cfg.Out, UseResidual: cfg.UseResidual, Activation: "torch.nn.modules.activation.Tanh"}
	if cfg.Activation != nil {
		d.Activation = *cfg.Activation
	}
	name := d.Activation[strings.LastIndex(d.Activation, ".")+1:]
	d.act = activations[name]
	switch {
	case !strings.HasPrefix(d.Activation, "torch."):
		d.act = math.Tanh // as sentence-transformers without trust_remote_code
	case d.act == nil:
		return nil, fmt.Errorf("%w: Dense module %s: activation %s (drainpipe has Tanh, Identity, ReLU, Sigmoid, GELU, SiLU)", ErrUnsupported, dir, d.Activation)
	}
	weights := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(weights); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "pytorch_model.bin")); err == nil {
			return nil, fmt.Errorf("%w: Dense module %s has its weights in pytorch_model.bin, a pickle: save it as model.safetensors", ErrUnsupported, dir)
		}
	}
	ts, err := readSafetensors(weights)
	if err != nil {
		return nil, err
	}
	get := func(key string, shape ...int) ([]float32, error) {
		t, ok := ts[key]
		if !ok {
			return nil, fmt.Errorf("%s: no tensor %q", weights, key)
		}
		if fmt.Sprint(t.shape) != fmt.Sprint(shape) {
			return nil, fmt.Errorf("%s: tensor %q has shape %v, want %v", weights, key, t.shape, shape)
		}
		return t.values, nil
	}
	if d.Weight, err = get("linear.weight", d.Out, d.In); err != nil {
		return nil, err
	}
	if cfg.Bias == nil || *cfg.Bias {
		if d.Bias, err = get("linear.bias", d.Out); err != nil {
			return nil, err
		}
	}
	if d.UseResidual && d.In != d.Out {
		if d.Residual, err = get("residual.weight", d.Out, d.In); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// OutWidth implements seq.Module.
func (d *Dense) OutWidth(in int) (int, error) {
	if in != d.In {
		return 0, fmt.Errorf("a Dense module of %d inputs gets vectors of %d", d.In, in)
	}
	return d.Out, nil
}

// Apply implements seq.Module, in float64 sums as a reference in float32
// would round no better.
func (d *Dense) Apply(dst, src []float32) {
	for o := range d.Out {
		row := d.Weight[o*d.In : (o+1)*d.In]
		var s float64
		for i, w := range row {
			s += float64(w) * float64(src[i])
		}
		if d.Bias != nil {
			s += float64(d.Bias[o])
		}
		y := d.act(float64(float32(s)))
		if d.UseResidual {
			if d.Residual == nil {
				y += float64(src[o])
			} else {
				var r float64
				for i, w := range d.Residual[o*d.In : (o+1)*d.In] {
					r += float64(w) * float64(src[i])
				}
				y += r
			}
		}
		dst[o] = float32(y)
	}
}
