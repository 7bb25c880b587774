package serve

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // model, protocol, code
	latency   *prometheus.HistogramVec // model, protocol
	queueWait *prometheus.HistogramVec // model
	batchSize *prometheus.HistogramVec // model
	padding   *prometheus.HistogramVec // model
	device    *prometheus.HistogramVec // model
	// loadFailures counts a repository's failed loads, by model folder
	// (an operator's name, not a client's).
	loadFailures *prometheus.CounterVec
}

// loadFailed counts a failed load of a repository model.
func (m *metrics) loadFailed(model string) { m.loadFailures.WithLabelValues(model).Inc() }

// latencyBuckets span 100µs to ~6.5s.
var latencyBuckets = prometheus.ExponentialBuckets(100e-6, 2, 17)

func newMetrics(reg *prometheus.Registry, models *registry) (*metrics, error) {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drainpipe_requests_total",
			Help: "Inference requests by model, protocol and response code (HTTP status or gRPC code).",
		}, []string{"model", "protocol", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drainpipe_request_duration_seconds",
			Help:    "Inference request time from decoded request to encoded response.",
			Buckets: latencyBuckets,
		}, []string{"model", "protocol"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drainpipe_queue_wait_seconds",
			Help:    "Time from a request's arrival until its last row left the queue for a batch.",
			Buckets: latencyBuckets,
		}, []string{"model"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drainpipe_batch_size_rows",
			Help:    "Padded size of each batch the device ran.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}, []string{"model"}),
		padding: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drainpipe_batch_padding_ratio",
			Help:    "Fraction of each batch's rows that were padding.",
			Buckets: prometheus.LinearBuckets(0, 0.125, 9),
		}, []string{"model"}),
		device: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drainpipe_batch_device_seconds",
			Help:    "Device time of each batch.",
			Buckets: latencyBuckets,
		}, []string{"model"}),
		loadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drainpipe_model_load_failures_total",
			Help: "Failed loads of a model repository's versions (or of its config), by model.",
		}, []string{"model"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.queueWait, m.batchSize, m.padding, m.device, m.loadFailures, newQueueCollector(models), newSequenceCollector(models)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// queueCollector reports each served model's queued rows when scraped:
// models come and go with a repository.
type queueCollector struct {
	desc *prometheus.Desc
	reg  *registry
}

func newQueueCollector(reg *registry) *queueCollector {
	return &queueCollector{reg: reg, desc: prometheus.NewDesc("drainpipe_queue_rows", "Rows waiting for a batch.", []string{"model", "version"}, nil)}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.reg.all() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(m.batcher.QueuedRows()), m.name, m.version)
	}
}

func (m *metrics) request(model, protocol, code string, took time.Duration) {
	m.requests.WithLabelValues(model, protocol, code).Inc()
	m.latency.WithLabelValues(model, protocol).Observe(took.Seconds())
}

// observer returns the batcher observer of one model.
func (m *metrics) observer(model string) *observer {
	return &observer{
		queueWait: m.queueWait.WithLabelValues(model),
		batchSize: m.batchSize.WithLabelValues(model),
		padding:   m.padding.WithLabelValues(model),
		device:    m.device.WithLabelValues(model),
	}
}

// observer feeds one model's batcher events into the histograms.
type observer struct {
	queueWait, batchSize, padding, device prometheus.Observer
}

func (o *observer) ObserveBatch(size, rows int, device time.Duration) {
	o.batchSize.Observe(float64(size))
	o.padding.Observe(float64(size-rows) / float64(size))
	o.device.Observe(device.Seconds())
}

func (o *observer) ObserveRequest(_ int, queueWait, _ time.Duration) {
	o.queueWait.Observe(queueWait.Seconds())
}

// sequenceCollector reports sequence models' tokens, padding and
// sub-batch shapes when scraped. A shape is a label only where the model
// declared it (a finite set); a model that pads sub-batches to their
// longest row reports its shapes by length alone ("any×S").
type sequenceCollector struct {
	tokens, slots, truncated, shapes *prometheus.Desc
	reg                              *registry
}

func newSequenceCollector(reg *registry) *sequenceCollector {
	labels := []string{"model", "version"}
	return &sequenceCollector{reg: reg,
		tokens:    prometheus.NewDesc("drainpipe_sequence_tokens_total", "Real tokens a sequence model ran.", labels, nil),
		slots:     prometheus.NewDesc("drainpipe_sequence_token_slots_total", "Token slots a sequence model ran, padding included: 1 - tokens/slots is the padding waste.", labels, nil),
		truncated: prometheus.NewDesc("drainpipe_sequence_truncated_rows_total", "Rows cut at the longest sequence, or texts the tokenizer cut at the model's length.", labels, nil),
		shapes:    prometheus.NewDesc("drainpipe_sequence_sub_batches_total", "Sub-batches a sequence model ran, by shape (rows×tokens).", append(labels, "shape"), nil),
	}
}

func (c *sequenceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tokens
	ch <- c.slots
	ch <- c.truncated
	ch <- c.shapes
}

func (c *sequenceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.reg.all() {
		if m.sequence == nil {
			continue
		}
		st, w := m.sequence.Stats(), m.warmedSeq
		counter := func(d *prometheus.Desc, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{m.name, m.version}, labels...)...)
		}
		counter(c.tokens, st.Tokens-w.Tokens)
		counter(c.slots, st.Slots-w.Slots)
		counter(c.truncated, st.Truncated-w.Truncated+m.textCut.Load())
		declared := m.sequence.Shapes()
		byLabel := map[string]int64{}
		for sh, n := range st.Shapes {
			label := sh.String()
			if declared == nil {
				label = fmt.Sprintf("any×%d", sh.Tokens)
			}
			byLabel[label] += n - w.Shapes[sh]
		}
		for label, n := range byLabel {
			counter(c.shapes, n, label)
		}
	}
}
