package serve

// The repository extension's operations, which the REST endpoints and
// the gRPC methods share.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
)

// repositoryIndex lists the repository's models.
func (s *Server) repositoryIndex(ctx context.Context, ready bool) ([]indexEntry, error) {
	if s.repo == nil {
		return nil, &Error{Code: CodeNotFound, Err: errors.New("the server has no model repository")}
	}
	out, err := s.repo.index(ctx, ready)
	if err != nil {
		return nil, &Error{Code: CodeInternal, Err: err}
	}
	return out, nil
}

// repositoryLoad loads, or reloads, a model of the repository.
func (s *Server) repositoryLoad(ctx context.Context, name string) error {
	return s.repositoryChange(name, func() error {
		if _, exists, err := s.repo.fs.dirs(ctx, s.repo.fs.join(s.repo.Dir, name)); err != nil || !exists {
			return &Error{Code: CodeNotFound, Err: fmt.Errorf("no model %q in the repository", name)}
		}
		if err := s.repo.syncModel(ctx, name, false); err != nil {
			return invalid(fmt.Errorf("load %s: %w", name, err))
		}
		return nil
	})
}

// repositoryUnload unloads every version of a model of the repository.
func (s *Server) repositoryUnload(name string) error {
	return s.repositoryChange(name, func() error {
		if !s.reg.has(name) && !s.repo.hasFailed(name) {
			return &Error{Code: CodeNotFound, Err: fmt.Errorf("model %q is not loaded", name)}
		}
		s.repo.unloadModel(name) // a model that failed to load too: it is no longer wanted
		return nil
	})
}

// repositoryChange runs a load or unload: refused while the repository
// is polled (the folder decides) or the server is starting or draining.
func (s *Server) repositoryChange(name string, change func() error) error {
	switch {
	case s.repo == nil:
		return &Error{Code: CodeNotFound, Err: errors.New("the server has no model repository")}
	case !folderName(name):
		return invalid(fmt.Errorf("%q is not a model's folder name", name))
	case s.repo.Poll > 0:
		return invalid(fmt.Errorf("the model repository is polled every %s: its folder decides what loads", s.repo.Poll))
	case !s.isServing():
		return &Error{Code: CodeUnavailable, Err: errors.New("the server is starting or draining")}
	case s.served[name]:
		return invalid(fmt.Errorf("model %q is served from its spec, not from the repository", name))
	}
	return change()
}

func (s *Server) restRepositoryIndex(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Ready bool `json:"ready"`
	}
	if body, err := s.readBody(w, r); err != nil {
		writeError(w, err)
		return
	} else if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			writeError(w, invalid(fmt.Errorf("malformed JSON request: %w", err)))
			return
		}
	}
	out, err := s.repositoryIndex(r.Context(), in.Ready)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) restRepositoryLoad(w http.ResponseWriter, r *http.Request) {
	s.restRepositoryChange(w, r, func() error { return s.repositoryLoad(r.Context(), r.PathValue("name")) })
}

func (s *Server) restRepositoryUnload(w http.ResponseWriter, r *http.Request) {
	s.restRepositoryChange(w, r, func() error { return s.repositoryUnload(r.PathValue("name")) })
}

func (s *Server) restRepositoryChange(w http.ResponseWriter, r *http.Request, change func() error) {
	_, err := s.readBody(w, r)
	if err == nil {
		err = change()
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// folderName reports whether name can only name a folder of the
// repository: one path element, not hidden.
func folderName(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".") && filepath.Base(name) == name
}
