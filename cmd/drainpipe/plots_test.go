package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// The confusion matrix is drawn as its table is printed: label 0 in the
// top row, predicted class 0 in the left column. With 100 rows of label 0
// predicted 0 and 1 of label 1 predicted 1, the top-left cell has the
// colour of the largest count (red) and the bottom-right that of the
// smallest (blue).
func TestConfusionOrientation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "confusion.png")
	if err := drawConfusion(path, evalReport{Rows: 101, Confusion: [][]int64{{100, 0}, {0, 1}}}, false); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	// The heat map spans about x 8%..80%, y 8%..88% of the image: sample
	// the middle of its top-left and bottom-right quarters.
	at := func(fx, fy float64) (r, bl uint32) {
		r, _, bl, _ = img.At(b.Min.X+int(fx*float64(b.Dx())), b.Min.Y+int(fy*float64(b.Dy()))).RGBA()
		return r, bl
	}
	if r, bl := at(0.25, 0.28); r <= bl {
		t.Errorf("top-left cell (label 0, predicted 0: 100 rows) is not red: r %d, b %d", r, bl)
	}
	if r, bl := at(0.62, 0.70); bl <= r {
		t.Errorf("bottom-right cell (label 1, predicted 1: 1 row) is not blue: r %d, b %d", r, bl)
	}
}
