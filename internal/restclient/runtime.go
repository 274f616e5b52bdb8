package restclient

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// maxPages bounds a list's paging (a server that never ends its pages).
const maxPages = 1000

// Create makes a box on the server from o (configured, not started: it
// boots on Start or its first exec). What the API cannot carry is refused
// with ErrUnsupported naming it, never dropped; what only tunes the local
// runtime is not carried: boot_timeout_secs (the server's own), prestart
// (a local template's parked sessions: a REST box starts them at first
// use, the same sessions a little later), detach (a server's boxes always
// are). AutoRemove is kept here: Stop removes the box after stopping it.
func (c *Client) Create(ctx context.Context, o abi.BoxOptions) (*Box, error) {
	req, err := createRequest(o)
	if err != nil {
		return nil, err
	}
	var w wire.Box
	if err := c.do(ctx, request{method: "POST", path: "/boxes", json: req}, &w); err != nil {
		return nil, err
	}
	b := c.box(w)
	b.autoRemove = abi.DefaultAutoRemove
	if o.AutoRemove != nil {
		b.autoRemove = *o.AutoRemove
	}
	return b, nil
}

func unsupported(what string) error {
	return errdefs.Errorf(errdefs.ErrUnsupported, "%s on a REST runtime", what)
}

// createRequest is o as BoxLite's create request.
func createRequest(o abi.BoxOptions) (wire.CreateBoxRequest, error) {
	switch {
	case len(o.Volumes) > 0:
		return wire.CreateBoxRequest{}, unsupported("volumes (host paths name this machine, not the server's)")
	case len(o.Ports) > 0:
		return wire.CreateBoxRequest{}, unsupported("published ports")
	case o.Hostname != "" && o.Hostname != abi.DefaultHostname:
		return wire.CreateBoxRequest{}, unsupported("a hostname")
	}
	req := wire.CreateBoxRequest{Name: o.Name, Image: o.Image, CPUs: o.CPUs, MemoryMiB: o.MemoryMiB, DiskSizeGB: o.DiskSizeGB,
		WorkingDir: o.WorkingDir, Env: o.Env, Entrypoint: o.Entrypoint, Cmd: o.Cmd, User: o.User}
	if a := o.Advanced; a != nil {
		if a.Security != nil || a.HealthCheck != nil {
			return wire.CreateBoxRequest{}, unsupported("security options and health checks (BoxLite's REST create carries capabilities only)")
		}
		if c := a.Capabilities; c != nil {
			req.Advanced = &wire.AdvancedOptions{Capabilities: &wire.Capabilities{Add: c.Add, Drop: c.Drop}}
		}
	}
	for _, s := range o.Secrets {
		req.Secrets = append(req.Secrets, wire.SecretSpec{Name: s.Name, Value: s.Value, Hosts: s.Hosts, Placeholder: s.Placeholder})
	}
	if n := o.Network; n != nil {
		mode := n.Mode
		if mode == "" {
			mode = boxlite.NetworkEnabled
		}
		req.Network = &wire.NetworkSpec{Outbound: &wire.DirectionSpec{Mode: mode, AllowNet: n.AllowNet}}
	}
	return req, nil
}

// Get is the box id or name.
func (c *Client) Get(ctx context.Context, idOrName string) (*Box, error) {
	if idOrName == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "get: empty box id or name")
	}
	var b wire.Box
	if err := c.doWithin(ctx, infoTimeout, request{method: "GET", path: "/boxes/" + seg(idOrName)}, &b); err != nil {
		return nil, err
	}
	return c.box(b), nil
}

// List is every box of the key, newest first.
func (c *Client) List(ctx context.Context) ([]boxlite.BoxInfo, error) {
	var out []boxlite.BoxInfo
	token := ""
	for range maxPages {
		q := url.Values{"pageSize": {"1000"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		var page wire.ListBoxesResponse
		if err := c.doWithin(ctx, infoTimeout, request{method: "GET", path: "/boxes", query: q}, &page); err != nil {
			return nil, err
		}
		for _, b := range page.Boxes {
			out = append(out, boxInfo(b))
		}
		if page.NextPageToken == nil || *page.NextPageToken == "" {
			return out, nil
		}
		token = *page.NextPageToken
	}
	return nil, errdefs.Errorf(errdefs.ErrLimit, "list boxes: more than %d pages", maxPages)
}

// Remove removes the box id or name.
func (c *Client) Remove(ctx context.Context, idOrName string, force bool) error {
	q := url.Values{"force": {strconv.FormatBool(force)}}
	return c.do(ctx, request{method: "DELETE", path: "/boxes/" + seg(idOrName), query: q}, nil)
}

// Images are the server's images.
func (c *Client) Images(ctx context.Context) ([]abi.ImageInfo, error) {
	out := []abi.ImageInfo{}
	token := ""
	for range maxPages {
		q := url.Values{"pageSize": {"1000"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		var page wire.ListImagesResponse
		if err := c.doWithin(ctx, infoTimeout, request{method: "GET", path: "/images", query: q}, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Images {
			out = append(out, imageInfo(m))
		}
		if page.NextPageToken == nil || *page.NextPageToken == "" {
			return out, nil
		}
		token = *page.NextPageToken
	}
	return nil, errdefs.Errorf(errdefs.ErrLimit, "list images: more than %d pages", maxPages)
}

// Pull pulls ref into the server's store.
func (c *Client) Pull(ctx context.Context, ref string) (abi.ImageInfo, error) {
	var m wire.ImageInfo
	if err := c.do(ctx, request{method: "POST", path: "/images/pull", json: wire.PullImageRequest{Reference: ref}}, &m); err != nil {
		return abi.ImageInfo{}, err
	}
	return imageInfo(m), nil
}

func imageInfo(m wire.ImageInfo) abi.ImageInfo {
	name := m.Reference
	if name == "" {
		name = m.Repository + ":" + m.Tag
	}
	var size int64
	if m.SizeBytes != nil {
		size = *m.SizeBytes
	}
	return abi.ImageInfo{Name: name, Digest: m.ID, SizeBytes: size, Layers: []abi.ImageLayer{}}
}

// Metrics are the server's runtime counters.
func (c *Client) Metrics(ctx context.Context) (abi.RuntimeMetrics, error) {
	var m wire.RuntimeMetrics
	if err := c.doWithin(ctx, infoTimeout, request{method: "GET", path: "/metrics"}, &m); err != nil {
		return abi.RuntimeMetrics{}, err
	}
	return abi.RuntimeMetrics{BoxesCreatedTotal: m.BoxesCreatedTotal, BoxesFailedTotal: m.BoxesFailedTotal,
		NumRunningBoxes: m.NumRunningBoxes, TotalCommandsExecuted: m.TotalCommandsExecuted, TotalExecErrors: m.TotalExecErrors}, nil
}

// boxInfo is what the API shows of a box, as the local runtime's info.
func boxInfo(b wire.Box) boxlite.BoxInfo {
	info := boxlite.BoxInfo{ID: b.BoxID, Image: b.Image, State: state(b.Status),
		Config: boxlite.BoxConfig{Image: b.Image, CPUs: b.CPUs, MemoryMiB: b.MemoryMiB, Detach: true}}
	if b.Name != nil {
		info.Name, info.Config.Name = *b.Name, *b.Name
	}
	if t, err := time.Parse(time.RFC3339Nano, b.CreatedAt); err == nil {
		info.CreatedAt = t
	}
	if b.StartedAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *b.StartedAt); err == nil {
			info.Runtime = &boxlite.BoxRuntimeInfo{StartedAt: t, LastActivityAt: t}
		}
	}
	return info
}

// state is our name of BoxLite's status.
func state(s string) boxlite.State {
	switch strings.ToLower(s) {
	case "configured":
		return boxlite.StateConfigured
	case "running":
		return boxlite.StateRunning
	case "stopping":
		return boxlite.StateStopping
	case "stopped":
		return boxlite.StateStopped
	}
	return boxlite.State(strings.ToLower(s))
}

// Me is the key this client calls with, as the server names it (GET
// /v1/me): one authenticated call, so a refused key fails it (as
// errdefs.ErrInvalidArgument, the server's unauthenticated answer).
func (c *Client) Me(ctx context.Context) (wire.Principal, error) {
	var p wire.Principal
	if err := c.doWithin(ctx, infoTimeout, request{method: "GET", path: "/me"}, &p); err != nil {
		return wire.Principal{}, err
	}
	return p, nil
}
