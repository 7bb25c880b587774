package main

import (
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The confusion matrix is drawn as its table is printed: label 0 in the
// top row, predicted class 0 in the left column. With 100 rows of label 0
// predicted 0 and 1 of label 1 predicted 1, the top-left cell has the
// colour of the largest count (dark) and the bottom-right that of the
// smallest (light).
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
	at := func(fx, fy float64) uint32 {
		r, g, bl, _ := img.At(b.Min.X+int(fx*float64(b.Dx())), b.Min.Y+int(fy*float64(b.Dy()))).RGBA()
		return r + g + bl
	}
	// The map is sequential, light to dark: the largest count is dark,
	// the smallest light.
	if big, small := at(0.25, 0.28), at(0.62, 0.70); big >= small/2 {
		t.Errorf("top-left cell (label 0, predicted 0: 100 rows) is not darker than the bottom-right (1 row): %d, %d", big, small)
	}
}

// The confusion matrix's colours are sequential: a larger count or
// fraction is darker, all the way (no neutral middle, as a diverging map
// has), and fractions' colour bar ends at 1.
func TestConfusionColoursSequential(t *testing.T) {
	// Relative luminance, the sRGB channels linearised.
	lum := func(c color.Color) float64 {
		r, g, b, _ := c.RGBA()
		lin := func(v uint32) float64 {
			x := float64(v) / 0xffff
			if x <= 0.04045 {
				return x / 12.92
			}
			return math.Pow((x+0.055)/1.055, 2.4)
		}
		return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
	}
	for _, normalized := range []bool{false, true} {
		cmap := confusionColors(0.97, normalized)
		if normalized && cmap.Max() != 1 {
			t.Fatalf("fractions' colour bar ends at %v, want 1", cmap.Max())
		}
		last := math.Inf(1)
		for v := 0.0; v <= 0.97; v += 0.01 {
			c, err := cmap.At(v)
			if err != nil {
				t.Fatal(err)
			}
			if l := lum(c); l > last+1e-9 {
				t.Fatalf("normalized %v: %.2f is lighter than the value before it", normalized, v)
			} else {
				last = l
			}
		}
	}
}
