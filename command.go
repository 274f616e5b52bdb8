package boxlite

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/image"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Exec starts a process in the box. A configured or stopped box is started
// first, as BoxLite's exec does; one whose last run ended in a fault (see
// shimapi.Exit) fails with ErrInvalidState naming it until Start, and a
// removed one fails with ErrInvalidState.
func (b *Box) Exec(ctx context.Context, cmd Command) (*Execution, error) {
	if len(cmd.Argv) == 0 {
		argv, err := b.DefaultCommand()
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		cmd.Argv = argv
	}
	if cmd.Argv[0] == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: empty command")
	}
	if cmd.Timeout < 0 || cmd.Grace < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: negative timeout or grace")
	}
	if cmd.OutputLimit < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: negative output limit %d", cmd.OutputLimit)
	}
	if cmd.OutputLimit == 0 {
		cmd.OutputLimit = b.rt.outputLimit
	}
	if cmd.Tty {
		if cmd.Rows == 0 {
			cmd.Rows = DefaultRows
		}
		if cmd.Cols == 0 {
			cmd.Cols = DefaultCols
		}
		if err := checkTermSize("exec", cmd.Rows, cmd.Cols); err != nil {
			return nil, err
		}
	}
	c, info, err := b.running(ctx, "exec")
	if err != nil {
		return nil, err
	}
	hello := info.Hello
	if cmd.Tty && !hello.Has(protocol.FeatureTTY) {
		// An older agent would ignore the field and run the process on pipes.
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: box %s runs an agent without terminal support (%s); restart the box to update it", b.rec.ID, hello.Agent)
	}
	if cmd.ID != "" {
		if !cmd.Detachable {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: an ID names a detachable execution; set Detachable too")
		}
		if err := protocol.CheckDetachID("exec", cmd.ID); err != nil {
			return nil, err
		}
	}
	if cmd.Root != "" && !hello.Has(protocol.FeatureExecRoot) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: box %s runs an agent without process roots (%s); restart the box to update it", b.rec.ID, hello.Agent)
	}
	if (len(cmd.Groups) > 0 || len(cmd.Rlimits) > 0) && !hello.Has(protocol.FeatureExecRlimits) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: box %s runs an agent without groups and rlimits (%s); restart the box to update it", b.rec.ID, hello.Agent)
	}
	if cmd.Detachable && !hello.Has(protocol.FeatureExecDetach) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: box %s runs an agent without detachable executions (%s); restart the box to update it", b.rec.ID, hello.Agent)
	}
	req, err := b.request(cmd)
	if err != nil {
		return nil, err
	}
	if len(req.Rlimits) > 0 && !hello.Has(protocol.FeatureExecRlimits) { // the box's security limits
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: box %s runs an agent without rlimits (%s); restart the box to update it", b.rec.ID, hello.Agent)
	}
	e := newExecution(c, hello, cmd.Argv, cmd.Tty, cmd.Stdin, cmd.Detachable)
	e.timeout, e.limit = cmd.Timeout, cmd.OutputLimit
	if cmd.ID != "" {
		e.xid = cmd.ID
	}
	if cmd.Detachable {
		req.Detach = e.xid
	}
	e.allowLane(b, hello, &req)
	if err := b.rt.counters.openExec(c, e, req); err != nil {
		return nil, fmt.Errorf("exec %s: %w", quoteArgv(cmd.Argv), err)
	}
	return e, nil
}

// hostMargin is how long past a command's timeout and grace period the host
// waits for the agent to report the exit: the guest enforces timeouts, but a
// hostile agent could just never answer.
const hostMargin = 10 * time.Second

// Run executes a command and collects its output.
func (b *Box) Run(ctx context.Context, cmd Command) (*ExecResult, error) {
	e, err := b.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if cmd.Timeout <= 0 {
		return e.Collect(ctx)
	}
	grace := cmd.Grace
	if grace == 0 {
		grace = protocol.DefaultGrace
	}
	bound := cmd.Timeout + grace + hostMargin
	bctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	res, err := e.Collect(bctx)
	if bctx.Err() != nil && ctx.Err() == nil {
		err = errdefs.Errorf(errdefs.ErrTimeout, "exec %s: the box did not report the exit within %s of its %s timeout; the process was abandoned",
			quoteArgv(cmd.Argv), grace+hostMargin, cmd.Timeout)
	}
	return res, err
}

// image is the box's image, read from the store once per handle (an image
// is immutable: it is named by its digest).
func (b *Box) image() (image.Image, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.img == nil {
		img, err := b.rt.images.Get(b.rec.ImageDigest)
		if err != nil {
			return image.Image{}, err
		}
		b.img = &img
	}
	return *b.img, nil
}

// DefaultCommand is what a bare exec runs: the box's entrypoint and cmd,
// each defaulting to the image's, as docker run does (an entrypoint given
// for the box drops the image's cmd). ErrInvalidArgument when both are empty.
func (b *Box) DefaultCommand() ([]string, error) {
	img, err := b.image()
	if err != nil {
		return nil, err
	}
	cfg := b.config()
	entry, args := img.Config.Entrypoint, img.Config.Cmd
	if cfg.Entrypoint != nil {
		entry, args = cfg.Entrypoint, nil
	}
	if cfg.Cmd != nil {
		args = cfg.Cmd
	}
	argv := append(append([]string{}, entry...), args...)
	if len(argv) == 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "no command given, and box %s (image %s) has no entrypoint or cmd", b.rec.ID, cfg.Image)
	}
	return argv, nil
}

// request merges image, box and command settings into the agent's request.
func (b *Box) request(cmd Command) (protocol.Exec, error) {
	img, err := b.image()
	if err != nil {
		return protocol.Exec{}, fmt.Errorf("exec: %w", err)
	}
	env := map[string]string{}
	layers := []map[string]string{b.rec.Config.Env, cmd.Env}
	if cmd.Root != "" {
		// Another root: the image's and the box's settings are not its.
		img.Config.Env, img.Config.WorkingDir, img.Config.User = nil, "", ""
		layers = layers[1:]
	}
	for _, kv := range img.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, m := range layers {
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return protocol.Exec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: env key %q is invalid", k)
			}
			env[k] = v
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	req := protocol.Exec{Argv: cmd.Argv, Stdin: cmd.Stdin, TimeoutMs: cmd.Timeout.Milliseconds(), GraceMs: cmd.Grace.Milliseconds()}
	if cmd.Tty {
		req.Tty, req.Rows, req.Cols = true, cmd.Rows, cmd.Cols
	}
	if cmd.Timeout > 0 && req.TimeoutMs == 0 {
		req.TimeoutMs = 1
	}
	for _, k := range keys {
		req.Env = append(req.Env, k+"="+env[k])
	}
	req.Cwd = firstNonEmpty(cmd.Cwd, b.rec.Config.WorkingDir, img.Config.WorkingDir, "/")
	req.User = firstNonEmpty(cmd.User, b.rec.Config.User, img.Config.User)
	if cmd.Root != "" {
		req.Root, req.Cwd, req.User = cmd.Root, firstNonEmpty(cmd.Cwd, "/"), firstNonEmpty(cmd.User, "0")
		for _, rb := range cmd.RootBinds {
			req.RootBinds = append(req.RootBinds, protocol.RootBind{Source: rb.Source, Target: rb.Target, ReadOnly: rb.ReadOnly})
		}
	} else if len(cmd.RootBinds) > 0 {
		return protocol.Exec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root binds without a root")
	}
	if len(cmd.Groups) > protocol.MaxGroups || len(cmd.Rlimits) > protocol.MaxRlimits {
		return protocol.Exec{}, errdefs.Errorf(errdefs.ErrLimit, "exec: %d groups, %d rlimits: limits %d, %d", len(cmd.Groups), len(cmd.Rlimits), protocol.MaxGroups, protocol.MaxRlimits)
	}
	req.Groups = cmd.Groups
	for _, r := range cmd.Rlimits {
		if r.Soft > r.Hard {
			return protocol.Exec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: rlimit %s: soft %d above hard %d", r.Type, r.Soft, r.Hard)
		}
		req.Rlimits = append(req.Rlimits, protocol.Rlimit{Type: r.Type, Soft: r.Soft, Hard: r.Hard})
	}
	if cmd.Root == "" { // a container root's process has its own (the containerd shim's)
		b.rec.Config.boxRlimits(&req)
	}
	if len(req.RootBinds) > protocol.MaxRootBinds {
		return protocol.Exec{}, errdefs.Errorf(errdefs.ErrLimit, "exec: %d root binds, limit %d", len(req.RootBinds), protocol.MaxRootBinds)
	}
	return req, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
