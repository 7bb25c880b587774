package online

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/drainpipe/drainpipe/predict"
)

// latencyWindow is how many recent requests latency percentiles cover.
const latencyWindow = 4096

// Stats is a snapshot of a Batcher's counters since it started.
type Stats struct {
	Requests   int64         // requests answered with predictions
	Rows       int64         // rows answered
	Batches    int64         // batches run, failed ones included
	BatchSizes map[int]int64 // batches by padded size
	// BatchSizeTime is the device time of the batches of each padded size.
	BatchSizeTime map[int]time.Duration
	PaddedRows    int64         // padding rows the device ran
	Overloads     int64         // requests refused with ErrOverloaded
	Timeouts      int64         // requests whose deadline passed first
	Cancellations int64         // requests whose context was cancelled first
	Failures      int64         // requests failed by their batch or by Close
	QueuedRows    int           // rows waiting now
	DeviceTime    time.Duration // running batches, summed over sessions
	// Summed over the requests answered: from arrival until the last of a
	// request's rows left the queue (QueueTime), and until its predictions
	// were ready (LatencyTime).
	QueueTime, LatencyTime time.Duration
	LastAnswer             time.Time // when the last request was answered

	// Over the last 4096 requests: from arrival until the last of a
	// request's rows left the queue, and until its predictions were ready.
	QueueWait, Latency Percentiles
}

// Percentiles summarises recent durations.
type Percentiles struct {
	P50, P99, Max time.Duration
}

// PaddingWaste returns the fraction of device rows that were padding.
func (s Stats) PaddingWaste() float64 {
	total := int64(0)
	for size, n := range s.BatchSizes {
		total += int64(size) * n
	}
	if total == 0 {
		return 0
	}
	return float64(s.PaddedRows) / float64(total)
}

func (s Stats) attr() slog.Attr {
	return slog.Group("stats",
		slog.Int64("requests", s.Requests),
		slog.Int64("rows", s.Rows),
		slog.Int64("batches", s.Batches),
		slog.Float64("padding_waste", s.PaddingWaste()),
		slog.Int64("overloads", s.Overloads),
		slog.Int64("timeouts", s.Timeouts),
		slog.Int64("cancellations", s.Cancellations),
		slog.Int64("failures", s.Failures),
		slog.Duration("queue_wait_p50", s.QueueWait.P50),
		slog.Duration("queue_wait_p99", s.QueueWait.P99),
		slog.Duration("latency_p50", s.Latency.P50),
		slog.Duration("latency_p99", s.Latency.P99),
	)
}

// Stats returns a snapshot of the Batcher's counters. It is safe to call at
// any time, also after Close.
func (b *Batcher) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats.Stats
	s.BatchSizes, s.BatchSizeTime = maps.Clone(s.BatchSizes), maps.Clone(s.BatchSizeTime)
	s.QueuedRows = b.queuedRows
	s.QueueWait = b.stats.queueWait.percentiles()
	s.Latency = b.stats.latency.percentiles()
	return s
}

// onlineStats are a Batcher's counters, guarded by its mutex.
type onlineStats struct {
	Stats
	queueWait, latency window
}

func (s *onlineStats) batch(j *job, device time.Duration) {
	if s.BatchSizes == nil {
		s.BatchSizes, s.BatchSizeTime = map[int]int64{}, map[int]time.Duration{}
	}
	s.Batches++
	s.BatchSizes[j.size]++
	s.BatchSizeTime[j.size] += device
	s.PaddedRows += int64(j.size - j.rows)
	s.DeviceTime += device
}

func (s *onlineStats) answered(r *request, latency time.Duration, at time.Time) {
	s.Requests++
	s.Rows += int64(r.rows)
	s.latency.add(latency)
	s.QueueTime += r.waited
	s.LatencyTime += latency
	s.LastAnswer = at
}

// window keeps the most recent durations.
type window struct {
	vals []time.Duration
	next int
}

func (w *window) add(d time.Duration) {
	if len(w.vals) < latencyWindow {
		w.vals = append(w.vals, d)
		return
	}
	w.vals[w.next] = d
	w.next = (w.next + 1) % latencyWindow
}

func (w *window) percentiles() Percentiles {
	if len(w.vals) == 0 {
		return Percentiles{}
	}
	v := slices.Clone(w.vals)
	slices.Sort(v)
	at := func(q float64) time.Duration { return v[min(int(q*float64(len(v))), len(v)-1)] }
	return Percentiles{P50: at(0.50), P99: at(0.99), Max: v[len(v)-1]}
}

// totals gives a run's predict.Stats from the Batcher's counters, for the
// Predictor's WithStats function.
func (s Stats) totals(wall time.Duration) predict.Stats {
	return predict.Stats{Rows: s.Rows, Batches: s.Batches, PaddedRows: s.PaddedRows, DeviceTime: s.DeviceTime, Wall: wall}
}
