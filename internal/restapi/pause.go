package restapi

import (
	"context"
	"net/http"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// boxlite's routes beyond BoxLite's API: pause, resume and fork.

func (a *API) pauseBox(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	p, err := b.Pause(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.PauseResponse{SavedAt: p.SavedAt.UTC().Format(time.RFC3339Nano), StateBytes: p.StateBytes, SaveMs: p.SaveMs})
	return nil
}

func (a *API) resumeBox(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	if err := b.Resume(r.Context()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, box(b.Info()))
	return nil
}

func (a *API) forkBox(w http.ResponseWriter, r *http.Request) error {
	var req wire.ForkBoxRequest
	if err := a.decode(r, &req, true); err != nil {
		return err
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 1 || req.Count > boxlite.MaxForks || len(req.Names) > req.Count {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "fork: count %d (1..%d) with %d names (at most count)", req.Count, boxlite.MaxForks, len(req.Names))
	}
	for _, n := range req.Names {
		if !idPattern.MatchString(n) {
			return errBadName(n)
		}
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	mem := b.Info().Config.MemoryMiB
	var dones []func()
	defer func() {
		for _, d := range dones {
			d()
		}
	}()
	for range req.Count {
		done, err := a.admitBox(r, mem)
		if err != nil {
			return err
		}
		dones = append(dones, done)
	}
	forks, err := b.Fork(r.Context(), req.Count, req.Names)
	if err != nil {
		return err
	}
	out := wire.ForkBoxResponse{Boxes: make([]wire.Box, 0, len(forks))}
	for i, f := range forks {
		if err := a.owners.add(f.ID(), caller(r), mem); err != nil {
			for _, g := range forks[i:] {
				_ = g.Remove(context.WithoutCancel(r.Context()), true)
			}
			return err
		}
		out.Boxes = append(out.Boxes, box(f.Info()))
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}
