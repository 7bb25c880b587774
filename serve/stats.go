package serve

import (
	"maps"
	"net/http"
	"slices"

	"github.com/drainpipe/drainpipe/online"
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
	st := m.batcher.Stats()
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
		out.BatchStats = append(out.BatchStats, batchStats{BatchSize: size, ComputeInfer: statDuration{Count: st.BatchSizes[size]}})
	}
	return out
}

func failed(st online.Stats) int64 {
	return st.Failures + st.Timeouts + st.Cancellations + st.Overloads
}

// restModelStats answers GET /v2/models/stats (every model) and
// /v2/models/NAME[/versions/V]/stats.
func (s *Server) restModelStats(w http.ResponseWriter, r *http.Request) {
	var models []*model
	if name := r.PathValue("name"); name != "" {
		m, err := s.lookup(name, r.PathValue("version"))
		if err != nil {
			writeError(w, err)
			return
		}
		models = append(models, m)
	} else if s.isStarted() {
		models = s.reg.all()
	}
	out := struct {
		ModelStats []modelStats `json:"model_stats"`
	}{ModelStats: []modelStats{}}
	for _, m := range models {
		out.ModelStats = append(out.ModelStats, m.stats())
	}
	writeJSON(w, http.StatusOK, out)
}
