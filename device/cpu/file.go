package cpu

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/drainpipe/drainpipe/internal/atomicfile"
)

// magic starts every model file; its last byte is the format version.
var magic = [8]byte{'D', 'P', 'M', 'L', 'P', 0, 0, 1}

// ErrFormat reports a model file that is not in the format, or is damaged.
var ErrFormat = errors.New("cpu: bad model file")

// Limits that keep a damaged header from asking for absurd allocations.
const (
	maxLayers     = 1 << 10
	maxParameters = 1 << 30
	maxNameBytes  = 1 << 12
)

// Save writes the model in the format described in the package doc.
func (m *MLP) Save(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return err
	}
	h := crc32.NewIEEE()
	bw := bufio.NewWriter(io.MultiWriter(w, h))
	le := binary.LittleEndian
	put := func(v any) {
		_ = binary.Write(bw, le, v) // bufio defers the write error to Flush
	}
	put(magic)
	put(uint32(len(m.Feature)))
	put([]byte(m.Feature))
	put(uint32(len(m.Layers)))
	for _, l := range m.Layers {
		put([3]uint32{uint32(l.In), uint32(l.Out), uint32(l.Activation)})
		put(l.Weights)
		put(l.Bias)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("cpu: save model: %w", err)
	}
	if err := binary.Write(w, le, h.Sum32()); err != nil {
		return fmt.Errorf("cpu: save model: %w", err)
	}
	return nil
}

// SaveFile writes the model to path atomically and durably: to a temporary
// file in the same folder, synced, renamed over path once complete, the
// folder synced.
func (m *MLP) SaveFile(path string) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("cpu: save model: %w", err)
	}
	if err := m.Save(f); err != nil {
		f.Abort()
		return err
	}
	if err := f.Commit(true); err != nil {
		return fmt.Errorf("cpu: save model: %w", err)
	}
	return nil
}

// Load reads a model written by [MLP.Save].
func Load(r io.Reader) (*MLP, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("cpu: load model: %w", err)
	}
	if len(data) < len(magic)+4 {
		return nil, fmt.Errorf("%w: %d bytes, too short", ErrFormat, len(data))
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if !bytes.Equal(body[:len(magic)-1], magic[:len(magic)-1]) {
		return nil, fmt.Errorf("%w: not a drainpipe MLP file", ErrFormat)
	}
	if body[len(magic)-1] != magic[len(magic)-1] {
		return nil, fmt.Errorf("%w: format version %d, want %d", ErrFormat, body[len(magic)-1], magic[len(magic)-1])
	}
	if got := crc32.ChecksumIEEE(body); got != sum {
		return nil, fmt.Errorf("%w: checksum %08x, stored %08x (damaged or truncated)", ErrFormat, got, sum)
	}
	br := bytes.NewReader(body[len(magic):])
	le := binary.LittleEndian
	var n uint32
	if err := binary.Read(br, le, &n); err != nil || n > maxNameBytes {
		return nil, fmt.Errorf("%w: feature name length", ErrFormat)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(br, name); err != nil {
		return nil, fmt.Errorf("%w: feature name: %v", ErrFormat, err)
	}
	m := &MLP{Feature: string(name)}
	if err := binary.Read(br, le, &n); err != nil || n == 0 || n > maxLayers {
		return nil, fmt.Errorf("%w: layer count", ErrFormat)
	}
	for i := range int(n) {
		var hdr [3]uint32
		if err := binary.Read(br, le, &hdr); err != nil {
			return nil, fmt.Errorf("%w: layer %d header: %v", ErrFormat, i, err)
		}
		in, out := int(hdr[0]), int(hdr[1])
		if in <= 0 || out <= 0 || uint64(in)*uint64(out) > maxParameters || in*out > br.Len()/4 {
			return nil, fmt.Errorf("%w: layer %d: %d×%d weights do not fit the file", ErrFormat, i, in, out)
		}
		l := Layer{In: in, Out: out, Activation: Activation(hdr[2]), Weights: make([]float32, in*out), Bias: make([]float32, out)}
		if err := binary.Read(br, le, l.Weights); err != nil {
			return nil, fmt.Errorf("%w: layer %d weights: %v", ErrFormat, i, err)
		}
		if err := binary.Read(br, le, l.Bias); err != nil {
			return nil, fmt.Errorf("%w: layer %d biases: %v", ErrFormat, i, err)
		}
		m.Layers = append(m.Layers, l)
	}
	if br.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrFormat, br.Len())
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return m, nil
}

// LoadFile reads a model file written by [MLP.SaveFile].
func LoadFile(path string) (*MLP, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cpu: load model: %w", err)
	}
	defer f.Close()
	m, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
