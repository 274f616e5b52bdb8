package restapi

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func snapshot(s boxlite.SnapshotInfo) wire.Snapshot {
	return wire.Snapshot{ID: s.ID, BoxID: s.BoxID, Name: s.Name, CreatedAt: s.CreatedAt,
		ContainerDiskBytes: s.ContainerDiskBytes, SizeBytes: s.SizeBytes, Memory: s.Memory, MemoryBytes: s.MemoryBytes}
}

func (a *API) createSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateSnapshotRequest
	if err := a.decode(r, &req, false); err != nil {
		return err
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	s, err := b.CreateSnapshotWith(r.Context(), req.Name, boxlite.SnapshotOptions{Memory: req.Memory})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, snapshot(s))
	return nil
}

func (a *API) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	ss, err := b.Snapshots(r.Context())
	if err != nil {
		return err
	}
	out := wire.ListSnapshotsResponse{Snapshots: make([]wire.Snapshot, 0, len(ss))}
	for _, s := range ss {
		out.Snapshots = append(out.Snapshots, snapshot(s))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getSnapshot(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	s, err := b.Snapshot(r.Context(), r.PathValue("snapshot_name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snapshot(s))
	return nil
}

func (a *API) removeSnapshot(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	if err := b.RemoveSnapshot(r.Context(), r.PathValue("snapshot_name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) restoreSnapshot(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	if err := b.RestoreSnapshot(r.Context(), r.PathValue("snapshot_name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) cloneBox(w http.ResponseWriter, r *http.Request) error {
	var req wire.CloneBoxRequest
	if err := a.decode(r, &req, true); err != nil {
		return err
	}
	if req.Name != "" && !idPattern.MatchString(req.Name) {
		return errBadName(req.Name)
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	info := b.Info()
	done, err := a.admitBox(r, info.Config.MemoryMiB)
	if err != nil {
		return err
	}
	defer done()
	c, err := b.Clone(r.Context(), boxlite.CloneOptions{Name: req.Name})
	if err != nil {
		return err
	}
	return a.created(w, r, c, info.Config.MemoryMiB)
}

// admitBox checks the caller's limits for one more box.
func (a *API) admitBox(r *http.Request, memMiB int) (func(), error) {
	live, err := a.rt.List(r.Context())
	if err != nil {
		return nil, err
	}
	return a.owners.admit(caller(r), memMiB, live, a.lim)
}

// created records a new box's owner and answers it.
func (a *API) created(w http.ResponseWriter, r *http.Request, b *boxlite.Box, memMiB int) error {
	if err := a.owners.add(b.ID(), caller(r), memMiB); err != nil {
		_ = b.Remove(context.WithoutCancel(r.Context()), true)
		return err
	}
	w.Header().Set("Location", "/v1/boxes/"+b.ID())
	writeJSON(w, http.StatusCreated, box(b.Info()))
	return nil
}

func (a *API) exportBox(w http.ResponseWriter, r *http.Request) error {
	var req wire.ExportBoxRequest
	if err := a.decode(r, &req, true); err != nil {
		return err
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(a.tmp, "export-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path, err := b.Export(r.Context(), filepath.Join(dir, "box.boxlite"))
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return serveSpool(w, f, "application/octet-stream", b.ID()+".boxlite")
}

func (a *API) importBox(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "name")
	if err != nil {
		return err
	}
	name := q["name"]
	if name != "" && !idPattern.MatchString(name) {
		return errBadName(name)
	}
	done, err := a.admitBox(r, abi.DefaultMemoryMiB)
	if err != nil {
		return err
	}
	defer done()
	path, err := a.spoolBody(r.Context(), w, r, "import-*.boxlite")
	if path != "" {
		defer os.Remove(path)
	}
	if err != nil {
		return err
	}
	b, err := a.rt.ImportBox(r.Context(), path, name, boxlite.WithDetach(), boxlite.WithAutoRemove(false))
	if err != nil {
		return err
	}
	return a.created(w, r, b, b.Info().Config.MemoryMiB)
}
