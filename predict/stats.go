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
