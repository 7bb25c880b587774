package predict

import (
	"log/slog"
	"time"
)

// Stats describes one finished run: enough to tell where a slow job waits.
type Stats struct {
	Rows       int64 // real rows predicted
	Batches    int64 // batches the device ran
	PaddedRows int64 // padding rows the device ran

	InputWait    time.Duration // reading, batching and padding input
	DeviceTime   time.Duration // inside device.Session.Predict
	ConsumerWait time.Duration // waiting for the consumer to take predictions
	Wall         time.Duration // session start to shutdown
}

// PaddingWaste returns the fraction of device rows that were padding.
func (s Stats) PaddingWaste() float64 {
	if s.Rows+s.PaddedRows == 0 {
		return 0
	}
	return float64(s.PaddedRows) / float64(s.Rows+s.PaddedRows)
}

func (s Stats) attr() slog.Attr {
	return slog.Group("stats",
		slog.Int64("rows", s.Rows),
		slog.Int64("batches", s.Batches),
		slog.Int64("padded_rows", s.PaddedRows),
		slog.Duration("input_wait", s.InputWait),
		slog.Duration("device", s.DeviceTime),
		slog.Duration("consumer_wait", s.ConsumerWait),
		slog.Duration("wall", s.Wall),
	)
}

// clock reads time elapsed on the monotonic clock alone, or nothing when
// stopped. A run reads it several times a batch, and a read costs tens of
// nanoseconds on some machines (time.Now, which reads the wall clock as
// well, twice that): a run whose statistics nobody reads stops it.
type clock struct {
	base    time.Time
	stopped bool
}

func newClock() clock { return clock{base: time.Now()} }

// now returns the time since the clock was made, or 0 if it is stopped.
func (c clock) now() time.Duration {
	if c.stopped {
		return 0
	}
	return time.Since(c.base)
}
