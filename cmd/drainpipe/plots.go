package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/drainpipe/drainpipe/eval"
)

// plotNames are the files drawEval may write.
var plotNames = []string{"confusion.png", "roc.png", "probability.png"}

// drawEval draws eval's plots into dir and returns their paths: the
// confusion matrix as a heat map with its counts (or, normalized, each
// label's row as fractions) and a colour bar, the ROC curve with its AUC
// (two classes; more: each class's against the rest), and a histogram of
// the predicted class's probability.
func drawEval(dir string, r evalReport, rocs []*eval.ROCAUCMetric, top []float64, normalized bool) ([]string, error) {
	var paths []string
	save := func(p *plot.Plot, name string) error {
		path := filepath.Join(dir, name)
		if err := p.Save(6*vg.Inch, 5*vg.Inch, path); err != nil {
			return err
		}
		paths = append(paths, path)
		return nil
	}
	confusion := filepath.Join(dir, "confusion.png")
	if err := drawConfusion(confusion, r, normalized); err != nil {
		return nil, err
	}
	paths = append(paths, confusion)

	if len(rocs) > 0 {
		if err := save(rocPlot(r, rocs), "roc.png"); err != nil {
			return nil, err
		}
	}

	p := newPlot("Probability of the predicted class", "probability", "rows")
	hist, err := plotter.NewHist(plotter.Values(top), 20)
	if err != nil {
		return nil, err
	}
	p.Add(hist)
	if err := save(p, "probability.png"); err != nil {
		return nil, err
	}
	return paths, nil
}

// rocPlot draws the ROC curves against chance: the binary classifier's
// (class 1 positive), or each class's against the rest.
func rocPlot(r evalReport, rocs []*eval.ROCAUCMetric) *plot.Plot {
	title := "ROC curve, class 1 positive"
	if len(rocs) > 1 {
		title = "ROC curves, each class against the rest"
	}
	p := newPlot(title, "false positive rate", "true positive rate")
	colors := plotutil.SoftColors
	for i, roc := range rocs {
		fpr, tpr := roc.Curve()
		pts := make(plotter.XYs, len(fpr))
		for j := range fpr {
			pts[j] = plotter.XY{X: fpr[j], Y: tpr[j]}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			continue // no rows
		}
		line.Color = colors[i%len(colors)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		name := fmt.Sprintf("model (AUC %.4f)", r.Metrics["roc_auc"])
		if len(rocs) > 1 {
			name = fmt.Sprintf("class %d (AUC %.4f)", i, roc.Value())
		}
		p.Legend.Add(name, line)
	}
	if chance, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}}); err == nil {
		chance.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(chance)
		p.Legend.Add("chance (AUC 0.5)", chance)
	}
	p.Legend.Left, p.Legend.Top = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8)
	return p
}

// newPlot returns a plot with its title and axes, the title kept off the
// image's edge.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text, p.Y.Label.Text = x, y
	return p
}

// confusionColors is the confusion matrix's colour map: sequential, light
// to dark, as counts are (a diverging one made a good cell at 79% look
// neutral), from 0 to the largest count, or to 1 for fractions.
func confusionColors(largest float64, normalized bool) palette.ColorMap {
	cmap := palette.Reverse(moreland.Kindlmann())
	cmap.SetMin(0)
	cmap.SetMax(max(largest, 1e-9))
	if normalized {
		cmap.SetMax(1)
	}
	return cmap
}

// drawConfusion draws the confusion matrix as scikit-learn and eval's table
// lay it out (label 0 in the top row, predicted classes left to right),
// each cell's count in a colour that reads on it, and a colour bar.
func drawConfusion(path string, r evalReport, normalized bool) error {
	k := len(r.Confusion)
	grid := confusionGrid{counts: r.Confusion, normalized: normalized}
	cmap := confusionColors(grid.max(), normalized)
	title := fmt.Sprintf("Confusion matrix (%d rows)", r.Rows)
	if normalized {
		title = fmt.Sprintf("Confusion matrix, each label's row as fractions (%d rows)", r.Rows)
	}
	p := newPlot(title, "predicted class", "label")
	p.Add(plotter.NewHeatMap(grid, cmap.Palette(64)))
	var xys plotter.XYs
	var texts []string
	for l, row := range r.Confusion {
		for c := range row {
			xys = append(xys, plotter.XY{X: float64(c), Y: float64(grid.row(l))})
			texts = append(texts, grid.text(l, c))
		}
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return err
	}
	for i, xy := range xys {
		v := grid.Z(int(xy.X), int(xy.Y))
		labels.TextStyle[i].Color = readableOn(cmap, v)
		labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
	}
	p.Add(labels)
	var xTicks, yTicks []plot.Tick
	for c := range k {
		xTicks = append(xTicks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
		yTicks = append(yTicks, plot.Tick{Value: float64(grid.row(c)), Label: fmt.Sprint(c)})
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.ConstantTicks(xTicks), plot.ConstantTicks(yTicks)

	bar := plot.New()
	bar.Add(&plotter.ColorBar{ColorMap: cmap, Vertical: true})
	bar.HideX()
	bar.Y.Padding = 0
	bar.Y.Label.Text = map[bool]string{false: "rows", true: "fraction of the label's rows"}[normalized]

	const w, h = 7 * vg.Inch, 5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	barWidth := 1.3 * vg.Inch
	p.Draw(draw.Crop(dc, 0, -barWidth, 0, 0))
	bar.Draw(draw.Crop(dc, w-barWidth+vg.Points(10), -vg.Points(10), vg.Points(40), -vg.Points(40)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readableOn returns black or white, whichever reads better on the colour
// v maps to.
func readableOn(cmap palette.ColorMap, v float64) color.Color {
	c, err := cmap.At(v)
	if err != nil {
		return color.Black
	}
	r, g, b, _ := c.RGBA()
	luminance := (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)) / 0xffff
	if luminance < 0.5 {
		return color.White
	}
	return color.Black
}

// confusionGrid is a confusion matrix as gonum/plot's grid: column c holds
// the rows predicted as c; label l is drawn in row k-1-l (the grid's rows
// go up), so label 0 is on top.
type confusionGrid struct {
	counts     [][]int64
	normalized bool
}

func (g confusionGrid) Dims() (c, r int) { return len(g.counts), len(g.counts) }
func (g confusionGrid) X(c int) float64  { return float64(c) }
func (g confusionGrid) Y(r int) float64  { return float64(r) }

// Z is the cell in drawing row r, column c: label k-1-r.
func (g confusionGrid) Z(c, r int) float64 { return g.value(g.row(r), c) }

// row is the drawing row of label l, and the label of drawing row l.
func (g confusionGrid) row(l int) int { return len(g.counts) - 1 - l }

// value is label l's count predicted as c, or its fraction of label l's
// rows.
func (g confusionGrid) value(l, c int) float64 {
	n := float64(g.counts[l][c])
	if !g.normalized {
		return n
	}
	total := int64(0)
	for _, v := range g.counts[l] {
		total += v
	}
	if total == 0 {
		return 0
	}
	return n / float64(total)
}

func (g confusionGrid) text(l, c int) string {
	if g.normalized {
		return fmt.Sprintf("%.2f", g.value(l, c))
	}
	return fmt.Sprint(g.counts[l][c])
}

func (g confusionGrid) max() float64 {
	m := 0.0
	for l := range g.counts {
		for c := range g.counts[l] {
			m = max(m, g.value(l, c))
		}
	}
	return m
}
