package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// restTimeout reads a request's timeout from the header or the "timeout"
// parameter (microseconds). Zero is no timeout; one past longestTimeout
// (Triton's clients send 2^64-1 µs for none) waits longestTimeout.
func restTimeout(header string, param json.RawMessage) (time.Duration, error) {
	if header != "" {
		if d, err := time.ParseDuration(header); err == nil && d >= 0 {
			return min(d, longestTimeout), nil
		}
		if secs, err := strconv.ParseFloat(header, 64); err == nil && secs >= 0 {
			return min(time.Duration(min(secs, longestTimeout.Seconds())*float64(time.Second)), longestTimeout), nil
		}
		return 0, fmt.Errorf("header %s: %q is neither a duration (250ms) nor seconds (0.25)", TimeoutHeader, header)
	}
	if len(param) == 0 {
		return 0, nil
	}
	if us, err := strconv.ParseUint(string(param), 10, 64); err == nil {
		return micros(us), nil
	}
	if us, err := strconv.ParseFloat(string(param), 64); err == nil && us >= 0 {
		return micros(uint64(min(us, math.MaxUint64/2))), nil
	}
	return 0, fmt.Errorf("parameter timeout: %s is not a count of microseconds", param)
}

// longestTimeout bounds a request's timeout.
const longestTimeout = 24 * time.Hour

// micros returns us microseconds as a timeout, at most longestTimeout.
func micros(us uint64) time.Duration {
	if us > uint64(longestTimeout/time.Microsecond) {
		return longestTimeout
	}
	return time.Duration(us) * time.Microsecond
}

// binarySize reads a binary extension parameter, key's value in params.
// ok reports it was there.
func binarySize(params jsonParams, key string) (v int64, ok bool, err error) {
	return sizeOrFlag(key, params[key])
}

// sizeOrFlag reads a binary extension parameter's value: a size is a
// non-negative integer; a flag (true/false) reads as 1/0. ok reports it
// was there.
func sizeOrFlag(key string, raw json.RawMessage) (v int64, ok bool, err error) {
	if len(raw) == 0 {
		return 0, false, nil
	}
	switch string(raw) {
	case "true":
		return 1, true, nil
	case "false":
		return 0, true, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
		return 0, true, fmt.Errorf("%s: %s is not a size or a flag", key, raw)
	}
	return v, true, nil
}

// writeInferResponse writes the response: JSON, and the outputs asked in
// binary after it (the binary tensor data extension).
func writeInferResponse(w http.ResponseWriter, req *inferRequest, resp *inferResponse) {
	out := restInferResponse{ModelName: resp.model, ModelVersion: resp.version, ID: resp.id, Outputs: make([]restTensor, len(resp.outputs))}
	var binary [][]byte
	for i, t := range resp.outputs {
		out.Outputs[i] = restTensor{Name: t.name, Datatype: t.datatype, Shape: t.shape, Data: t.data}
		if req.binaryOut[""] || req.binaryOut[t.name] {
			raw := datatypes[t.datatype].toRaw(t.data)
			out.Outputs[i].Data = nil
			out.Outputs[i].Parameters = map[string]any{"binary_data_size": len(raw)}
			binary = append(binary, raw)
		}
	}
	if binary == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	head, err := json.Marshal(out)
	if err != nil {
		writeError(w, &Error{Code: CodeInternal, Err: err})
		return
	}
	size := len(head)
	for _, b := range binary {
		size += len(b)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(BinaryHeader, strconv.Itoa(len(head)))
	w.Header().Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(http.StatusOK)
	w.Write(head)
	for _, b := range binary {
		w.Write(b)
	}
}

// BinaryHeader is the header of the binary tensor data extension: the
// length of the JSON that starts a body, binary tensors following it.
const BinaryHeader = "Inference-Header-Content-Length"
