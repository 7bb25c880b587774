package hfmodel

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// file is a safetensors file of one F32 tensor "w" [2] = {1, 2}.
func file() []byte {
	h := []byte(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	return append(out, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40)
}

func readBytes(t testing.TB, data []byte) (map[string]tensor, error) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return readSafetensors(path)
}

// A damaged file is an error naming the format, never a panic or a
// tensor of other values: cut anywhere, a header that claims more bytes
// than there are, ranges outside the data or of the wrong size.
func TestSafetensorsDamaged(t *testing.T) {
	good := file()
	ts, err := readBytes(t, good)
	if err != nil || len(ts["w"].values) != 2 || ts["w"].values[0] != 1 || ts["w"].values[1] != 2 {
		t.Fatalf("the good file: %v %v", ts, err)
	}
	for n := range len(good) {
		if _, err := readBytes(t, good[:n]); !errors.Is(err, ErrSafetensors) {
			t.Errorf("cut at %d bytes: %v", n, err)
		}
	}
	for _, header := range []string{
		`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}}`,
		`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`,
		`{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`,
		`{"w":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}}`,
		`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`,
		`{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`,
		`{"w":[]}`,
	} {
		data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
		data = append(append(data, header...), make([]byte, 8)...)
		if _, err := readBytes(t, data); !errors.Is(err, ErrSafetensors) {
			t.Errorf("%s: %v", header, err)
		}
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<62)
	if _, err := readBytes(t, huge); !errors.Is(err, ErrSafetensors) {
		t.Errorf("a header of 2^62 bytes: %v", err)
	}
}

// FuzzSafetensors: any bytes read as a safetensors file give tensors
// whose values fill their shapes, or ErrSafetensors; never a panic.
func FuzzSafetensors(f *testing.F) {
	f.Add(file())
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := readBytes(t, data)
		if err != nil {
			if !errors.Is(err, ErrSafetensors) {
				t.Fatalf("an error not naming the format: %v", err)
			}
			return
		}
		for name, x := range ts {
			n := 1
			for _, d := range x.shape {
				n *= d
			}
			if n != len(x.values) {
				t.Fatalf("tensor %q: %d values for shape %v", name, len(x.values), x.shape)
			}
		}
	})
}
