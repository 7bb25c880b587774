package serve

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/drainpipe/drainpipe/online"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// The statistics extension (Triton's), from each model's batcher counters.

type statDuration struct {
	Count int64 `json:"count"`
	NS    int64 `json:"ns"`
}

type inferenceStats struct {
	Success      statDuration `json:"success"`
	Fail         statDuration `json:"fail"`
	Queue        statDuration `json:"queue"`
	ComputeInfer statDuration `json:"compute_infer"`
}

type batchStats struct {
	BatchSize    int          `json:"batch_size"`
	ComputeInfer statDuration `json:"compute_infer"`
}

type modelStats struct {
	Name           string         `json:"name"`
	Version        string         `json:"version"`
	LastInference  int64          `json:"last_inference"` // ms since the Unix epoch
	InferenceCount int64          `json:"inference_count"`
	ExecutionCount int64          `json:"execution_count"`
	InferenceStats inferenceStats `json:"inference_stats"`
	BatchStats     []batchStats   `json:"batch_stats"`
}

// stats reports one model: requests answered (success), failed, timed
// out, cancelled or refused (fail), their time queued (queue) and the
// batches the device ran (compute_infer), by padded batch size too.
func (m *model) stats() modelStats {
	st := since(m.batcher.Stats(), m.warmed)
	out := modelStats{Name: m.name, Version: m.version, InferenceCount: st.Rows, ExecutionCount: st.Batches,
		InferenceStats: inferenceStats{
			Success:      statDuration{st.Requests, st.LatencyTime.Nanoseconds()},
			Fail:         statDuration{Count: failed(st)},
			Queue:        statDuration{st.Requests, st.QueueTime.Nanoseconds()},
			ComputeInfer: statDuration{st.Batches, st.DeviceTime.Nanoseconds()},
		}}
	if !st.LastAnswer.IsZero() {
		out.LastInference = st.LastAnswer.UnixMilli()
	}
	for _, size := range slices.Sorted(maps.Keys(st.BatchSizes)) {
		out.BatchStats = append(out.BatchStats, batchStats{BatchSize: size, ComputeInfer: statDuration{st.BatchSizes[size], st.BatchSizeTime[size].Nanoseconds()}})
	}
	return out
}

// since returns the counters of st past those of base (a model's
// warm-up, which is not an inference).
func since(st, base online.Stats) online.Stats {
	st.Requests -= base.Requests
	st.Rows -= base.Rows
	st.Batches -= base.Batches
	st.PaddedRows -= base.PaddedRows
	st.DeviceTime -= base.DeviceTime
	st.QueueTime -= base.QueueTime
	st.LatencyTime -= base.LatencyTime
	for size, n := range base.BatchSizes {
		if st.BatchSizes[size] -= n; st.BatchSizes[size] == 0 {
			delete(st.BatchSizes, size)
		}
		st.BatchSizeTime[size] -= base.BatchSizeTime[size]
	}
	if st.Requests == 0 {
		st.LastAnswer = time.Time{}
	}
	return st
}

func failed(st online.Stats) int64 {
	return st.Failures + st.Timeouts + st.Cancellations + st.Overloads
}

// modelStats returns the statistics of a model's version, every version
// of it (version ""), or every model (name "").
func (s *Server) modelStats(name, version string) ([]modelStats, error) {
	var models []*model
	switch {
	case name == "":
		if s.isStarted() {
			models = s.reg.all()
		}
	case version == "" && s.reg.has(name):
		for _, v := range s.reg.versions(name) {
			if m, ok := s.reg.find(name, v, false); ok {
				models = append(models, m)
			}
		}
	default:
		m, err := s.lookup(name, version)
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	out := []modelStats{}
	for _, m := range models {
		out = append(out, m.stats())
	}
	return out, nil
}

// restModelStats answers GET /v2/models/stats (every model) and
// /v2/models/NAME[/versions/V]/stats.
func (s *Server) restModelStats(w http.ResponseWriter, r *http.Request) {
	stats, err := s.modelStats(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string][]modelStats{"model_stats": stats})
}

// pb returns the statistics as the gRPC message.
func (st modelStats) pb() *pb.ModelStatistics {
	d := func(x statDuration) *pb.StatisticDuration {
		return &pb.StatisticDuration{Count: uint64(x.Count), Ns: uint64(x.NS)}
	}
	out := &pb.ModelStatistics{Name: st.Name, Version: st.Version, LastInference: uint64(st.LastInference),
		InferenceCount: uint64(st.InferenceCount), ExecutionCount: uint64(st.ExecutionCount),
		InferenceStats: &pb.InferStatistics{Success: d(st.InferenceStats.Success), Fail: d(st.InferenceStats.Fail),
			Queue: d(st.InferenceStats.Queue), ComputeInfer: d(st.InferenceStats.ComputeInfer)}}
	for _, b := range st.BatchStats {
		out.BatchStats = append(out.BatchStats, &pb.InferBatchStatistics{BatchSize: uint64(b.BatchSize), ComputeInfer: d(b.ComputeInfer)})
	}
	return out
}
