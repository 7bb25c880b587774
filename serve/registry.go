package serve

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// registry is the models served, by name and version: what a request
// finds. A model leaves it before it is closed, and is closed only once
// the requests that found it are done with it, so swapping a version for
// another fails no request.
type registry struct {
	mu     sync.RWMutex
	models map[string]map[string]*model // by name, then version
}

// add serves m, and returns the model it replaces (the same name and
// version), if any, for the caller to retire.
func (r *registry) add(m *model) *model {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.models == nil {
		r.models = map[string]map[string]*model{}
	}
	if r.models[m.name] == nil {
		r.models[m.name] = map[string]*model{}
	}
	old := r.models[m.name][m.version]
	r.models[m.name][m.version] = m
	return old
}

// remove stops serving a version and returns it, for the caller to retire.
func (r *registry) remove(name, version string) *model {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.models[name][version]
	delete(r.models[name], version)
	if len(r.models[name]) == 0 {
		delete(r.models, name)
	}
	return m
}

// find returns a model by name and version; "" is the latest version.
// With use, the model is acquired: the caller calls its release when its
// request is done.
func (r *registry) find(name, version string, use bool) (*model, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	versions := r.models[name]
	if version == "" {
		version = latest(slices.Collect(maps.Keys(versions)))
	}
	m := versions[version]
	if m != nil && use {
		m.users.Add(1)
	}
	return m, m != nil
}

// has reports whether name is served, in any version.
func (r *registry) has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.models[name]) > 0
}

// names returns the names served, sorted.
func (r *registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.models))
}

// versions returns the versions of name served, oldest first.
func (r *registry) versions(name string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.SortedFunc(maps.Keys(r.models[name]), compareVersions)
}

// all returns every model served, by name then version.
func (r *registry) all() []*model {
	var out []*model
	for _, name := range r.names() {
		for _, v := range r.versions(name) {
			if m, ok := r.find(name, v, false); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// compareVersions orders versions as numbers where they are (Triton's
// versions are), else as text.
func compareVersions(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	return cmp.Compare(a, b)
}

// latest returns the highest version, or "".
func latest(versions []string) string {
	if len(versions) == 0 {
		return ""
	}
	return slices.MaxFunc(versions, compareVersions)
}
