package serve

import (
	"context"
	"maps"
	"slices"
)

// indexEntry is one model version of the repository index.
type indexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// index lists the repository's models: the versions served (READY), those
// that failed to load (UNAVAILABLE, with the reason), and models in the
// folder not loaded (no state).
func (r *repository) index(ctx context.Context, readyOnly bool) ([]indexEntry, error) {
	names, err := r.names(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []indexEntry
	for _, name := range names {
		versions := r.s.reg.versions(name)
		for _, v := range versions {
			e := indexEntry{Name: name, Version: v, State: "READY"}
			if m, ok := r.s.reg.find(name, v, false); ok {
				e.Reason = m.note
			}
			out = append(out, e)
		}
		for _, v := range slices.Sorted(maps.Keys(r.failed[name])) {
			if !readyOnly && !slices.Contains(versions, v) {
				out = append(out, indexEntry{Name: name, Version: v, State: "UNAVAILABLE", Reason: r.failed[name][v]})
			}
		}
		if len(versions) == 0 && len(r.failed[name]) == 0 && !readyOnly {
			out = append(out, indexEntry{Name: name})
		}
	}
	return out, nil
}
