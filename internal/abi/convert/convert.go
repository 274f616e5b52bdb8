package convert

import (
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/image"
)

// BoxOptions are the core options of o; core validates them.
func BoxOptions(o abi.BoxOptions) ([]boxlite.BoxOption, error) {
	var opts []boxlite.BoxOption
	add := func(cond bool, opt func() boxlite.BoxOption) {
		if cond {
			opts = append(opts, opt())
		}
	}
	add(o.Name != "", func() boxlite.BoxOption { return boxlite.WithName(o.Name) })
	add(o.MemoryMiB != nil, func() boxlite.BoxOption { return boxlite.WithMemoryMiB(*o.MemoryMiB) })
	add(o.CPUs != nil, func() boxlite.BoxOption { return boxlite.WithCPUs(*o.CPUs) })
	add(o.DiskSizeGB != nil, func() boxlite.BoxOption { return boxlite.WithDiskSizeGB(*o.DiskSizeGB) })
	for k, v := range o.Env {
		opts = append(opts, boxlite.WithEnv(k, v))
	}
	add(o.WorkingDir != "", func() boxlite.BoxOption { return boxlite.WithWorkingDir(o.WorkingDir) })
	add(o.User != "", func() boxlite.BoxOption { return boxlite.WithUser(o.User) })
	add(o.Hostname != "", func() boxlite.BoxOption { return boxlite.WithHostname(o.Hostname) })
	add(len(o.Prestart) > 0, func() boxlite.BoxOption { return boxlite.WithPrestart(o.Prestart...) })
	if o.BootTimeoutSecs != nil {
		d, err := o.BootTimeoutSecs.Positive("box options: boot_timeout_secs")
		if err != nil {
			return nil, err
		}
		opts = append(opts, boxlite.WithBootTimeout(d))
	}
	if o.AutoPauseSecs != nil {
		d, err := o.AutoPauseSecs.Duration("box options: auto_pause_secs")
		if err != nil {
			return nil, err
		}
		opts = append(opts, boxlite.WithAutoPause(d))
	}
	if o.AutoRemove != nil {
		opts = append(opts, boxlite.WithAutoRemove(*o.AutoRemove))
	}
	add(o.Detach, boxlite.WithDetach)
	add(o.Entrypoint != nil, func() boxlite.BoxOption { return boxlite.WithEntrypoint(o.Entrypoint...) })
	add(o.Cmd != nil, func() boxlite.BoxOption { return boxlite.WithCmd(o.Cmd...) })
	if o.Network != nil {
		spec, err := Network(*o.Network)
		if err != nil {
			return nil, err
		}
		opts = append(opts, boxlite.WithNetwork(spec))
	}
	if len(o.Ports) > 0 {
		ports := make([]boxlite.Port, len(o.Ports))
		for i, p := range o.Ports {
			ports[i] = boxlite.Port{Protocol: p.Protocol, HostIP: p.HostIP, HostPort: p.HostPort, GuestPort: p.GuestPort}
		}
		opts = append(opts, boxlite.WithPorts(ports...))
	}
	for _, sec := range o.Secrets {
		opts = append(opts, boxlite.WithSecrets(boxlite.Secret{Name: sec.Name, Value: sec.Value,
			Hosts: append([]string(nil), sec.Hosts...), Placeholder: sec.Placeholder}))
	}
	for _, v := range o.Volumes {
		opts = append(opts, boxlite.WithVolumeSpec(boxlite.Volume{HostPath: v.HostPath, GuestPath: v.GuestPath,
			ReadOnly: v.ReadOnly, SizeLimitBytes: v.SizeLimitBytes}))
	}
	adv, err := advancedOptions(o.Advanced)
	if err != nil {
		return nil, err
	}
	return append(opts, adv...), nil
}

// ImportOptions are the core options of an import's o: box options but for
// the image and name, which the archive and the import's own argument give.
func ImportOptions(o abi.BoxOptions) ([]boxlite.BoxOption, error) {
	if o.Image != "" || o.Name != "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "import options: image and name are not options of an import (the archive has the image; the name is an argument)")
	}
	return BoxOptions(o)
}

// BoxInfo is info on the wire.
func BoxInfo(info boxlite.BoxInfo) abi.BoxInfo {
	c := info.Config
	w := abi.BoxInfo{ID: info.ID, Name: info.Name, Image: info.Image, State: string(info.State),
		CreatedAtUnix: info.CreatedAt.Unix(), CreatedAt: info.CreatedAt.UTC().Format(time.RFC3339Nano),
		Dir: info.Dir, LastExit: info.LastExit, Faulted: info.Faulted,
		Config: abi.BoxConfig{Image: c.Image, Name: c.Name, MemoryMiB: c.MemoryMiB, CPUs: c.CPUs, DiskSizeGB: c.DiskSizeGB,
			Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, BootTimeoutSecs: abi.SecondsOf(c.BootTimeout),
			AutoRemove: c.AutoRemove, Detach: c.Detach, Entrypoint: c.Entrypoint, Cmd: c.Cmd,
			Network: abi.Network{Mode: c.Network.OutboundMode(), AllowNet: c.Network.AllowNet}, Ports: ports(c.Ports),
			KernelArgs: c.KernelArgs, Hostname: c.Hostname, Prestart: c.Prestart, AutoPauseSecs: abi.SecondsOf(c.AutoPause)}}
	if w.Config.Network.Mode == "" {
		w.Config.Network.Mode = boxlite.NetworkEnabled
	}
	allow := c.Network.AllowNet
	if allow == nil {
		allow = []string{}
	}
	w.Network = abi.BoxNetwork{Outbound: abi.NetworkDirection{Mode: c.Network.OutboundMode(), AllowNet: allow},
		Inbound: abi.NetworkDirection{Mode: c.Network.InboundMode(), AllowNet: []string{}},
		Mode:    c.Network.OutboundMode(), AllowNet: allow, PublishedPorts: ports(c.Ports)}
	if r := info.Runtime; r != nil && r.Network != nil {
		w.Network.PublishedPorts = ports(r.Network.Ports)
	}
	if w.Network.PublishedPorts == nil {
		w.Network.PublishedPorts = []abi.Port{}
	}
	w.Config.Advanced = advancedInfo(c)
	w.HealthStatus = healthInfo(info.Health)
	if w.Config.Hostname == "" {
		w.Config.Hostname = abi.DefaultHostname
	}
	for _, sec := range c.Secrets {
		w.Config.Secrets = append(w.Config.Secrets, abi.SecretInfo{Name: sec.Name, Hosts: sec.Hosts, Placeholder: sec.Placeholder})
	}
	for _, v := range c.Volumes {
		w.Config.Volumes = append(w.Config.Volumes, abi.Volume{HostPath: v.HostPath, GuestPath: v.GuestPath,
			ReadOnly: v.ReadOnly, SizeLimitBytes: v.SizeLimitBytes})
	}
	if r := info.Runtime; r != nil {
		w.Runtime = &abi.BoxRuntimeInfo{Accel: r.Accel, AccelReason: r.AccelReason, Kernel: r.Kernel, BootMs: r.BootMs,
			GuestKernelMs: r.GuestKernelMs, GuestReadyMs: r.GuestReadyMs, ShimPid: r.ShimPid, VMMPid: r.VMMPid,
			Start: r.Start, StartNote: r.StartNote, Warnings: r.Warnings, StartedAt: rfc3339(r.StartedAt), LastActivity: rfc3339(r.LastActivityAt)}
		if n := r.Network; n != nil {
			w.Runtime.Network = &abi.NetworkInfo{GuestIP: n.GuestIP, GatewayIP: n.GatewayIP, AllowNet: n.AllowNet, Ports: ports(n.Ports)}
			if s := n.Stats; s != nil {
				w.Runtime.Network.Stats = &abi.NetworkStats{BytesToGuest: s.BytesToGuest, BytesFromGuest: s.BytesFromGuest,
					TCPConns: s.TCPConns, TCPErrors: s.TCPErrors, UDPFlows: s.UDPFlows}
			}
		}
	}
	return w
}

func ports(ps []boxlite.Port) []abi.Port {
	var out []abi.Port
	for _, p := range ps {
		out = append(out, abi.Port{Protocol: p.Protocol, HostIP: p.HostIP, HostPort: p.HostPort, GuestPort: p.GuestPort})
	}
	return out
}

// BoxInfos is a list of infos on the wire.
func BoxInfos(infos []boxlite.BoxInfo) []abi.BoxInfo {
	out := make([]abi.BoxInfo, len(infos))
	for i, info := range infos {
		out[i] = BoxInfo(info)
	}
	return out
}

// Command is c for boxlite.
func Command(c abi.Command) (boxlite.Command, error) {
	bad := func(format string, args ...any) (boxlite.Command, error) {
		return boxlite.Command{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "command: "+format, args...)
	}
	timeout, err := c.TimeoutSecs.Duration("command: timeout_secs")
	if err != nil {
		return boxlite.Command{}, err
	}
	if c.OutputLimit < 0 {
		return bad("output_limit_bytes %d is negative", c.OutputLimit)
	}
	if !c.Tty && (c.Rows != 0 || c.Cols != 0) {
		return bad("rows and cols need \"tty\": true")
	}
	return boxlite.Command{Argv: c.Argv, Env: c.Env, Cwd: c.Cwd, User: c.User, Timeout: timeout, Stdin: c.Stdin,
		Tty: c.Tty, Rows: c.Rows, Cols: c.Cols, OutputLimit: c.OutputLimit}, nil
}

// CopyOptions are o for core, and the copy's timeout (0: none).
func CopyOptions(o abi.CopyOptions) (boxlite.CopyOptions, time.Duration, error) {
	if o.MaxBytes < -1 || o.MaxEntries < -1 {
		return boxlite.CopyOptions{}, 0, errdefs.Errorf(errdefs.ErrInvalidArgument,
			"copy options: max_bytes and max_entries are > 0, 0 (default) or -1 (no cap)")
	}
	var timeout time.Duration
	if o.TimeoutSecs != nil {
		var err error
		if timeout, err = o.TimeoutSecs.Positive("copy options: timeout_secs"); err != nil {
			return boxlite.CopyOptions{}, 0, err
		}
	}
	var layout boxlite.CopyLayout
	switch o.Layout {
	case "", "docker":
	case "boxlite":
		layout = boxlite.LayoutBoxLite
	default:
		return boxlite.CopyOptions{}, 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "copy options: layout %q: \"docker\" or \"boxlite\"", o.Layout)
	}
	no := func(b *bool) bool { return b != nil && !*b }
	return boxlite.CopyOptions{NoOverwrite: no(o.Overwrite), FollowSymlinks: o.FollowSymlinks, ContentsOnly: no(o.IncludeParent),
		NoRecursive: no(o.Recursive), Layout: layout, MaxBytes: o.MaxBytes, MaxEntries: o.MaxEntries}, timeout, nil
}

// SessionOptions are o for boxlite.
func SessionOptions(o abi.SessionOptions) (boxlite.SessionOptions, error) {
	opts := boxlite.SessionOptions{Python: o.Python, Shell: o.Shell, Env: o.Env, Cwd: o.Cwd, User: o.User, OutputLimit: o.OutputLimit, Name: o.Name}
	if o.GraceSecs != nil {
		var err error
		if opts.Grace, err = o.GraceSecs.Positive("session options: grace_secs"); err != nil {
			return boxlite.SessionOptions{}, err
		}
	}
	return opts, nil
}

// SnapshotOptions is o in Go.
func SnapshotOptions(o abi.SnapshotOptions) boxlite.SnapshotOptions {
	return boxlite.SnapshotOptions{Memory: o.Memory}
}

// ShellCommand is c's timeout (0: none), after checking c.
func ShellCommand(c abi.ShellCommand) (time.Duration, error) {
	if c.OutputLimit < 0 {
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell command: output_limit_bytes %d is negative", c.OutputLimit)
	}
	return c.TimeoutSecs.Duration("shell command: timeout_secs")
}

// CellResult is r on the wire.
func CellResult(r boxlite.CellResult) abi.CellResult {
	w := abi.CellResult{Stdout: string(r.Stdout), Stderr: string(r.Stderr), Value: r.Value,
		ExitCode: r.ExitCode, TimedOut: r.TimedOut, Restarted: r.Restarted,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated}
	if e := r.Error; e != nil {
		w.Error = &abi.CellError{Type: e.Type, Message: e.Message, Traceback: e.Traceback}
	}
	return w
}

// Images are the store's images on the wire.
func Images(imgs []image.Image) []abi.ImageInfo {
	out := make([]abi.ImageInfo, len(imgs))
	for i, m := range imgs {
		out[i] = abi.ImageInfo{Name: m.Name, Digest: m.Digest, SizeBytes: m.Size, Layers: []abi.ImageLayer{}, CachedAt: rfc3339(m.CachedAt),
			Config: abi.ImageConfig{Env: m.Config.Env, WorkingDir: m.Config.WorkingDir, User: m.Config.User,
				Entrypoint: m.Config.Entrypoint, Cmd: m.Config.Cmd}}
		for _, l := range m.Layers {
			out[i].Layers = append(out[i].Layers, abi.ImageLayer{DiffID: l.DiffID, SizeBytes: l.Size})
		}
	}
	return out
}

// rfc3339 is t in RFC 3339 with microseconds, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") // fixed width: sorts as text, Python parses it
}

// SocketAddress is a tunnel listener's address; boxlite.SocketAddress.Check
// validates it.
func SocketAddress(a abi.SocketAddress) (boxlite.SocketAddress, error) {
	s := boxlite.SocketAddress{Network: a.Type, Host: a.Host, Port: a.Port, Path: a.Path}
	return s, s.Check()
}

// SocketAddressOf is a listener's address for the wire.
func SocketAddressOf(s boxlite.SocketAddress) abi.SocketAddress {
	return abi.SocketAddress{Type: s.Network, Host: s.Host, Port: s.Port, Path: s.Path}
}

// Network is a box's network from BoxLite's split form or the flat one (not
// both); an inbound allow-list is unsupported, as BoxLite's.
func Network(n abi.Network) (boxlite.NetworkSpec, error) {
	bad := func(f string, a ...any) (boxlite.NetworkSpec, error) {
		return boxlite.NetworkSpec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, f, a...)
	}
	if (n.Mode != "" || n.AllowNet != nil) && (n.Outbound != nil || n.Inbound != nil) {
		return bad("network: the flat mode/allow_net and the split outbound/inbound cannot be mixed")
	}
	spec := boxlite.NetworkSpec{Mode: n.Mode, AllowNet: n.AllowNet}
	if o := n.Outbound; o != nil {
		if o.Mode == "" {
			return bad("network.outbound.mode is required")
		}
		spec.Mode, spec.AllowNet = o.Mode, o.AllowNet
	}
	if i := n.Inbound; i != nil {
		if i.Mode != boxlite.NetworkEnabled && i.Mode != boxlite.NetworkDisabled {
			return bad("network.inbound.mode %q: want enabled or disabled", i.Mode)
		}
		if len(i.AllowNet) > 0 {
			return boxlite.NetworkSpec{}, errdefs.Errorf(errdefs.ErrUnsupported, "network.inbound.allow_net is not supported: inbound access follows its mode alone")
		}
		spec.Inbound = i.Mode
	}
	return spec, nil
}

// CodeExecution is a code context's cell on the wire; timedOut is whether
// a timeout interrupted it.
func CodeExecution(e *boxlite.CodeExecution, timedOut bool) abi.CodeExecution {
	w := abi.CodeExecution{Results: make([]abi.CodeResult, 0, len(e.Results)),
		Logs: abi.CodeLogs{Stdout: append([]string{}, e.Logs.Stdout...), Stderr: append([]string{}, e.Logs.Stderr...),
			StdoutTruncated: e.Logs.StdoutTruncated, StderrTruncated: e.Logs.StderrTruncated},
		ExecutionCount: e.ExecutionCount, ResultsTruncated: e.ResultsTruncated, Restarted: e.Restarted, TimedOut: timedOut}
	for _, r := range e.Results {
		w.Results = append(w.Results, abi.CodeResult{IsMainResult: r.IsMain, Data: r.Data})
	}
	if x := e.Error; x != nil {
		w.Error = &abi.CodeError{Name: x.Name, Value: x.Value, Traceback: x.Traceback}
	}
	return w
}
