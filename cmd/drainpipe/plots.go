package main

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/drainpipe/drainpipe/eval"
)

// drawEval draws eval's plots into dir and returns their paths: the
// confusion matrix as a heat map with its counts, the ROC curve with its
// AUC (2 classes), and a histogram of the predicted class's probability.
func drawEval(dir string, r evalReport, roc *eval.ROCAUCMetric, top []float64, k int) ([]string, error) {
	var paths []string
	save := func(p *plot.Plot, name string) error {
		path := filepath.Join(dir, name)
		if err := p.Save(6*vg.Inch, 5*vg.Inch, path); err != nil {
			return err
		}
		paths = append(paths, path)
		return nil
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Confusion matrix (%d rows)", r.Rows)
	p.X.Label.Text, p.Y.Label.Text = "predicted class", "label"
	grid := confusionGrid(r.Confusion)
	heat := plotter.NewHeatMap(grid, moreland.SmoothBlueRed().Palette(64))
	p.Add(heat)
	var xys plotter.XYs
	var counts []string
	for l, row := range r.Confusion {
		for c, n := range row {
			xys = append(xys, plotter.XY{X: float64(c), Y: float64(l)})
			counts = append(counts, fmt.Sprint(n))
		}
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: counts})
	if err != nil {
		return nil, err
	}
	p.Add(labels)
	var ticks []plot.Tick
	for c := range len(r.Confusion) {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.ConstantTicks(ticks), plot.ConstantTicks(ticks)
	if err := save(p, "confusion.png"); err != nil {
		return nil, err
	}

	if k == 2 {
		fpr, tpr := roc.Curve()
		pts := make(plotter.XYs, len(fpr))
		for i := range fpr {
			pts[i] = plotter.XY{X: fpr[i], Y: tpr[i]}
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("ROC curve (AUC %.4f)", r.Metrics["roc_auc"])
		p.X.Label.Text, p.Y.Label.Text = "false positive rate", "true positive rate"
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		chance, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
		if err != nil {
			return nil, err
		}
		chance.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(line, chance)
		if err := save(p, "roc.png"); err != nil {
			return nil, err
		}
	}

	p = plot.New()
	p.Title.Text = "Probability of the predicted class"
	p.X.Label.Text, p.Y.Label.Text = "probability", "rows"
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

// confusionGrid is a confusion matrix as gonum/plot's grid: column c,
// row l holds the count of label l predicted as c.
type confusionGrid [][]int64

func (g confusionGrid) Dims() (c, r int)   { return len(g), len(g) }
func (g confusionGrid) Z(c, r int) float64 { return float64(g[r][c]) }
func (g confusionGrid) X(c int) float64    { return float64(c) }
func (g confusionGrid) Y(r int) float64    { return float64(r) }
