package restapi

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// defaultImage is what a create without an image boots (BoxLite's default).
const defaultImage = "alpine:latest"

func (a *API) getConfig(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, wire.ServerConfig{
		Defaults:  wire.ConfigDefaults{CPUs: abi.DefaultCPUs, MemoryMiB: abi.DefaultMemoryMiB, DiskSizeGB: abi.DefaultDiskSizeGB},
		Overrides: map[string]string{"detach": "true"},
		Capabilities: wire.ConfigCapabilities{
			MaxCPUs: abi.MaxCPUs, MaxMemoryMiB: abi.MaxMemoryMiB, MaxDiskSizeGB: abi.MaxDiskSizeGB,
			MaxBoxesPerPathPrefix: a.lim.BoxesPerKey, MaxConcurrentExecutions: a.lim.ExecsPerKey,
			FileTransferMaxBytes: a.lim.TransferBytes, ExecTimeoutMaxSeconds: maxExecTimeout.Seconds(),
			TTYEnabled: true, StreamingEnabled: true, SnapshotsEnabled: true, CloneEnabled: true, ExportEnabled: true,
			IdempotencyKeyLifetime: idemLifetimeISO,
		},
	})
	return nil
}

// scopes are everything boxlite serve serves: a key may do all of it.
var scopes = []string{"box:read", "box:write", "box:exec", "box:delete", "me:read"}

func (a *API) getMe(w http.ResponseWriter, r *http.Request) error {
	name := caller(r)
	writeJSON(w, http.StatusOK, wire.Principal{Sub: name, PrincipalType: "service_account", DisplayName: name, Scopes: scopes})
	return nil
}

// box is the API's view of info.
func box(info boxlite.BoxInfo) wire.Box {
	b := wire.Box{
		BoxID: info.ID, Status: status(info.State), Image: info.Image,
		CreatedAt: info.CreatedAt.UTC().Format(time.RFC3339Nano), CPUs: info.Config.CPUs,
		MemoryMiB: info.Config.MemoryMiB, Labels: map[string]string{}, AutoResume: true,
	}
	b.UpdatedAt = b.CreatedAt
	if info.Name != "" {
		n := info.Name
		b.Name = &n
	}
	if info.Runtime != nil && info.Runtime.VMMPid > 0 {
		pid := info.Runtime.VMMPid
		b.PID = &pid
	}
	if info.Runtime != nil && !info.Runtime.StartedAt.IsZero() {
		at := info.Runtime.StartedAt.UTC().Format(time.RFC3339Nano)
		b.StartedAt = &at
	}
	return b
}

// status is BoxLite's name of a state (a booting box is running to it:
// its VM is being made; stopping and the rest are the same words).
func status(s boxlite.State) string {
	switch s {
	case boxlite.StateStarting:
		return "running"
	case boxlite.StateConfigured, boxlite.StateRunning, boxlite.StateStopping, boxlite.StateStopped, boxlite.StatePaused:
		return string(s)
	}
	return "unknown"
}

func (a *API) getBox(ctx context.Context, r *http.Request) (*boxlite.Box, error) {
	return a.rt.Get(ctx, r.PathValue("box_id"))
}

func (a *API) createBox(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateBoxRequest
	if err := a.decode(r, &req, false); err != nil {
		return err
	}
	image, opts, err := boxOptions(req)
	if err != nil {
		return err
	}
	mem := abi.DefaultMemoryMiB
	if req.MemoryMiB != nil {
		mem = *req.MemoryMiB
	}
	done, err := a.admitBox(r, mem)
	if err != nil {
		return err
	}
	defer done()
	if err := a.ensureImage(r.Context(), image); err != nil {
		return err
	}
	b, err := a.rt.Create(r.Context(), image, opts...)
	if err != nil {
		return err
	}
	return a.created(w, r, b, mem)
}

func errBadName(n string) error {
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "name %q: must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", truncate(n))
}

// maxCapNames bounds each of a create's capability lists (Linux has 41
// capabilities; a name may come with or without CAP_).
const maxCapNames = 64

// boxOptions turns a create request into the runtime's options. What the
// request names that boxlite serve does not do is refused, never dropped.
func boxOptions(req wire.CreateBoxRequest) (string, []boxlite.BoxOption, error) {
	unsupported := func(what string) (string, []boxlite.BoxOption, error) {
		return "", nil, newError(errNotServed, "%s is not supported by boxlite serve", what)
	}
	switch {
	case req.RootfsPath != "":
		return "", nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "rootfs_path is refused: a path would name the server's file system; give an image")
	case len(req.Volumes) > 0:
		return unsupported("volumes (managed volumes are BoxLite cloud's)")
	case req.TTY:
		return unsupported("tty (a box's main command on a terminal)")
	case req.AutoStop != nil && *req.AutoStop != 0:
		return unsupported("auto_stop other than 0")
	case req.AutoDelete != nil && *req.AutoDelete != 0:
		return unsupported("auto_delete other than 0")
	}
	image := req.Image
	if image == "" {
		image = defaultImage
	}
	opts := []boxlite.BoxOption{boxlite.WithDetach(), boxlite.WithAutoRemove(false)} // BoxLite's auto_delete 0: kept when stopped
	if req.Name != "" {
		if !idPattern.MatchString(req.Name) {
			return "", nil, errBadName(req.Name)
		}
		opts = append(opts, boxlite.WithName(req.Name))
	}
	if req.CPUs != nil {
		opts = append(opts, boxlite.WithCPUs(*req.CPUs))
	}
	if req.MemoryMiB != nil {
		opts = append(opts, boxlite.WithMemoryMiB(*req.MemoryMiB))
	}
	if req.DiskSizeGB != nil {
		opts = append(opts, boxlite.WithDiskSizeGB(*req.DiskSizeGB))
	}
	if req.WorkingDir != "" {
		opts = append(opts, boxlite.WithWorkingDir(req.WorkingDir))
	}
	if req.User != "" {
		opts = append(opts, boxlite.WithUser(req.User))
	}
	for k, v := range req.Env {
		opts = append(opts, boxlite.WithEnv(k, v))
	}
	if req.Entrypoint != nil {
		opts = append(opts, boxlite.WithEntrypoint(req.Entrypoint...))
	}
	if req.Cmd != nil {
		opts = append(opts, boxlite.WithCmd(req.Cmd...))
	}
	if len(req.Secrets) > 0 {
		secrets := make([]boxlite.Secret, len(req.Secrets))
		for i, s := range req.Secrets {
			secrets[i] = boxlite.Secret{Name: s.Name, Value: s.Value, Hosts: s.Hosts, Placeholder: s.Placeholder}
		}
		opts = append(opts, boxlite.WithSecrets(secrets...))
	}
	if a := req.Advanced; a != nil && a.Capabilities != nil {
		c := a.Capabilities
		if len(c.Add) > maxCapNames || len(c.Drop) > maxCapNames {
			return "", nil, errdefs.Errorf(errdefs.ErrLimit, "advanced.capabilities: at most %d names to add and %d to drop", maxCapNames, maxCapNames)
		}
		opts = append(opts, boxlite.WithCapabilities(boxlite.Capabilities{Add: c.Add, Drop: c.Drop}))
	}
	if req.Network != nil {
		spec, err := network(*req.Network)
		if err != nil {
			return "", nil, err
		}
		opts = append(opts, boxlite.WithNetwork(spec))
	}
	return image, opts, nil
}

// network is the box's network from the split form or the flat one (not
// both). The inbound side has nothing to enforce (a local box has no public
// side): its mode is kept, an allow-list refused as BoxLite does.
func network(n wire.NetworkSpec) (boxlite.NetworkSpec, error) {
	flat := n.Mode != "" || n.AllowNet != nil
	if flat && (n.Outbound != nil || n.Inbound != nil) {
		return boxlite.NetworkSpec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "network: the flat mode/allow_net and the nested outbound/inbound cannot be mixed")
	}
	if n.Inbound != nil {
		if err := checkMode("network.inbound.mode", n.Inbound.Mode); err != nil {
			return boxlite.NetworkSpec{}, err
		}
		if len(n.Inbound.AllowNet) > 0 {
			return boxlite.NetworkSpec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "network.inbound.allow_net is not supported: inbound access is controlled by its mode alone")
		}
	}
	out := wire.DirectionSpec{Mode: n.Mode, AllowNet: n.AllowNet}
	if n.Outbound != nil {
		out = *n.Outbound
		if out.Mode == "" {
			return boxlite.NetworkSpec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "network.outbound.mode is required")
		}
	}
	if out.Mode == "" {
		out.Mode = boxlite.NetworkEnabled
	}
	if err := checkMode("network.outbound.mode", out.Mode); err != nil {
		return boxlite.NetworkSpec{}, err
	}
	if out.Mode == "disabled" && len(out.AllowNet) > 0 {
		return boxlite.NetworkSpec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "network: allow_net needs mode enabled")
	}
	spec := boxlite.NetworkSpec{Mode: out.Mode, AllowNet: out.AllowNet}
	if n.Inbound != nil {
		spec.Inbound = n.Inbound.Mode
	}
	return spec, nil
}

func checkMode(what, m string) error {
	if m != "enabled" && m != "disabled" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %q: want enabled or disabled", what, truncate(m))
	}
	return nil
}

func (a *API) listBoxes(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "pageSize", "pageToken", "status")
	if err != nil {
		return err
	}
	infos, err := a.rt.List(r.Context())
	if err != nil {
		return err
	}
	sort.Slice(infos, func(i, j int) bool {
		if !infos[i].CreatedAt.Equal(infos[j].CreatedAt) {
			return infos[i].CreatedAt.Before(infos[j].CreatedAt)
		}
		return infos[i].ID < infos[j].ID
	})
	boxes := make([]wire.Box, 0, len(infos))
	for _, info := range infos {
		b := box(info)
		if s, ok := q["status"]; ok && b.Status != s {
			continue
		}
		boxes = append(boxes, b)
	}
	page, next, err := paginate(len(boxes), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ListBoxesResponse{Boxes: boxes[page[0]:page[1]], NextPageToken: next})
	return nil
}

// paginate is the window [from, to) of n items a page asks for, and the
// next page's token (nil on the last page).
func paginate(n int, q map[string]string) ([2]int, *string, error) {
	size := 100
	if v, ok := q["pageSize"]; ok {
		s, err := strconv.Atoi(v)
		if err != nil || s < 1 || s > 1000 {
			return [2]int{}, nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "pageSize %q: want 1 to 1000", truncate(v))
		}
		size = s
	}
	from := 0
	if v, ok := q["pageToken"]; ok {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		f, err2 := strconv.Atoi(string(raw))
		if err != nil || err2 != nil || f < 0 {
			return [2]int{}, nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "pageToken %q is not one this server gave", truncate(v))
		}
		from = min(f, n)
	}
	to := min(from+size, n)
	var next *string
	if to < n {
		t := base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(to)))
		next = &t
	}
	return [2]int{from, to}, next, nil
}

func (a *API) getBoxInfo(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, box(b.Info()))
	return nil
}

func (a *API) headBox(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.getBox(r.Context(), r); err != nil {
		w.WriteHeader(answerFor(err).Status)
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) removeBox(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "force")
	if err != nil {
		return err
	}
	force, err := boolParam(q, "force", false)
	if err != nil {
		return err
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	if err := b.Remove(r.Context(), force); err != nil {
		return err
	}
	a.owners.remove(b.ID())
	a.execs.forgetBox(b.ID())
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) startBox(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	if err := b.Start(r.Context()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, box(b.Info()))
	return nil
}

func (a *API) stopBox(w http.ResponseWriter, r *http.Request) error {
	var req wire.StopBoxRequest
	if err := a.decode(r, &req, true); err != nil {
		return err
	}
	grace := r.Context()
	if req.TimeoutSeconds != nil {
		d, err := req.TimeoutSeconds.Positive("timeout_seconds")
		if err != nil {
			return err
		}
		var cancel context.CancelFunc
		grace, cancel = context.WithTimeout(grace, d)
		defer cancel()
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	err = b.Stop(grace)
	if errors.Is(err, errdefs.ErrTimeout) && grace.Err() != nil && r.Context().Err() == nil {
		// BoxLite's timeout_seconds is the graceful part: past it the box
		// is ended (its shim kills the VM), and the stop answers once it has.
		err = b.Stop(r.Context())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, box(b.Info()))
	return nil
}
