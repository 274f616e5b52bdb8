package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// stageArg is argv[1] of the helper when it runs the jail stage; argv[2] is
// the descriptor number of the spec pipe, the status pipe follows it.
const stageArg = "__boxlite_jail_stage__"

// ReadyTimeout bounds how long Ready waits for the stage to reach execve.
// The stage normally takes a few milliseconds.
const ReadyTimeout = 30 * time.Second

// Spec describes one program to run confined.
type Spec struct {
	// Path is the program, an absolute path as seen inside the jail. /usr
	// (and /lib, /lib64, /bin, /sbin as the host has them) are always bound
	// read-only, so programs installed there need no Bind.
	Path string
	// Args is argv, Args[0] included. Required.
	Args []string
	// Env is the program's whole environment; nil means empty.
	Env []string
	// UID and GID are the identity to run as when the caller is root; both
	// must be non-zero then (see AllocUID). A non-root caller cannot change
	// identity: the program keeps the caller's uid and gid and these are
	// ignored.
	UID, GID uint32
	// KeepRoot lets a root caller's program keep uid 0 (UID and GID are
	// ignored then), for a helper that must act on the host's files as its
	// caller does, e.g. virtiofsd creating a box's files as the user who
	// runs boxlite. Every other layer still applies; the UID layer is
	// reported as not applied. No effect for a non-root caller.
	KeepRoot bool
	// Binds are host files and directories made visible inside, read-only
	// unless Writable. Their submounts are not carried along. Without a
	// mount namespace (Layers.MountNS missing) no bind is made and the
	// program sees the host's files: keep Inside equal to Host (the
	// default) and a Spec works either way.
	Binds []Bind
	// Devices are device nodes made available at the same path, e.g.
	// "/dev/kvm", "/dev/null", "/dev/urandom"; nothing else is in /dev. A
	// root caller gets new nodes owned by UID/GID with the host node's
	// permission bits (the host's /dev/kvm is root's); otherwise the host's
	// nodes are bound in and their own permissions apply.
	Devices []string
	// Cgroup, when set, puts the program in a cgroup of its own with these
	// limits, created at Start and removed by Wait.
	Cgroup *CgroupSpec
	// Rlimits are set before execve; nil means DefaultRlimits(), an empty
	// non-nil slice sets none.
	Rlimits []Rlimit
	// ExtraFiles are inherited as descriptors 3, 4, ... in order; nil
	// entries are not allowed. The program reaches its disks, sockets and
	// logs through these, never through paths it could not open as its uid.
	ExtraFiles []*os.File
	// Stdout and Stderr receive the program's output; nil discards it. The
	// program's stdin is /dev/null.
	Stdout, Stderr io.Writer
	// HostNetwork keeps the host's network namespace (a user-mode network
	// stack needs it). By default the program gets a new, empty one: no
	// interface but a down loopback, no abstract Unix sockets of the host.
	HostNetwork bool
	// DenySetID: no set-id mode bits, device nodes or xattrs (fsPolicy).
	DenySetID bool
}

// Bind makes a host path visible inside the jail.
type Bind struct {
	Host   string // absolute host path; symlinks are resolved (see File)
	Inside string // absolute path inside; empty means the same as Host
	// Writable leaves the bind writable; it is read-only otherwise. Either
	// way it is nosuid and nodev, and the program's uid must be allowed to
	// write by the file's own permissions.
	Writable bool
	// File, when set, is the source (a directory or regular file, O_PATH
	// is enough), not Host's path, which only names it: see bindfd.go.
	File *os.File `json:"-"`
}

// CgroupSpec names the program's cgroup and its limits. Zero limits are not
// set (and the layer is reported as not applied).
type CgroupSpec struct {
	// Name is the leaf group's name, unique per box: 1 to 64 bytes of
	// [A-Za-z0-9._-], e.g. "boxlite-<boxid>". A leftover empty group of that
	// name (from a crashed caller) is reused; a busy one is an error.
	Name string
	// MemoryMaxBytes is memory.max (v2) or memory.limit_in_bytes (v1); swap
	// is limited to none where the host has the file.
	MemoryMaxBytes int64
	// PidsMax is pids.max: processes and threads together.
	PidsMax int64
	// CPUWeight is cpu.weight, 1 to 10000 (default 100 when unset); under
	// cgroup v1 cpu.shares = CPUWeight*1024/100.
	CPUWeight uint64
}

// Rlimit is one resource limit, set with setrlimit(2) before execve.
type Rlimit struct {
	Resource int // unix.RLIMIT_*
	Cur, Max uint64
}

// DefaultRlimits are the limits applied when Spec.Rlimits is nil: no core
// dumps (a VMM's core holds guest memory) and at most 4096 open files. The
// file size and process limits are left alone: the program writes disks
// through descriptors, and pids.max bounds processes per box where
// RLIMIT_NPROC would count every process of a shared uid.
func DefaultRlimits() []Rlimit {
	return []Rlimit{
		{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
		{Resource: unix.RLIMIT_NOFILE, Cur: 4096, Max: 4096},
	}
}

// StageError is a failure of the jail stage in the helper, before the
// program was executed. It unwraps to the syscall.Errno (when there is one)
// and to an errdefs kind: ENOENT is ErrNotFound, EINVAL/ENOTDIR/EISDIR/
// ENOEXEC are ErrInvalidArgument, ETIMEDOUT is ErrTimeout, anything else
// ErrInternal.
type StageError struct {
	Step string // what failed: "bind /x", "pivot_root", "setuid", "execve /usr/bin/qemu", ...
	Err  error
}

func (e *StageError) Error() string { return "jail: " + e.Step + ": " + e.Err.Error() }

func (e *StageError) Unwrap() []error { return []error{e.Err, errnoKind(e.Err)} }

func errnoKind(err error) error {
	var no syscall.Errno
	if errors.As(err, &no) {
		switch no {
		case unix.ENOENT:
			return errdefs.ErrNotFound
		case unix.EINVAL, unix.ENOTDIR, unix.EISDIR, unix.ENOEXEC:
			return errdefs.ErrInvalidArgument
		case unix.ETIMEDOUT:
			return errdefs.ErrTimeout
		}
	}
	if errors.Is(err, errdefs.ErrTimeout) {
		return errdefs.ErrTimeout
	}
	return errdefs.ErrInternal
}

// Cmd is one confined program. Start it, then Ready, then Wait.
type Cmd struct {
	helper string
	spec   Spec
	root   bool // the caller is root: drop to spec.UID/GID
	cmd    *exec.Cmd
	cg     *cgroup
	layers Layers

	started   bool     // Start was called
	running   bool     // Start succeeded
	status    *os.File // read end of the status pipe
	readyOnce sync.Once
	readyErr  error
	waitOnce  sync.Once
	waitErr   error
	bindFiles []*os.File // sources of the binds with a File, after the status pipe
}

var cgroupNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Command checks s and returns the Cmd that runs it confined through
// helper, the absolute path of a binary whose main calls Main first
// (normally the caller's own executable; "" means os.Executable()). Nothing
// is started. Errors wrap errdefs.ErrInvalidArgument and name the field;
// whether Path and the Binds exist is checked by the stage (see Ready).
func Command(helper string, s Spec) (*Cmd, error) {
	bad := func(field, format string, a ...any) (*Cmd, error) {
		return nil, fmt.Errorf("jail: Spec.%s: %s: %w", field, fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
	}
	if helper == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("jail: helper: %v: %w", err, errdefs.ErrInternal)
		}
		helper = exe
	}
	if !filepath.IsAbs(helper) {
		return nil, fmt.Errorf("jail: helper %q: not an absolute path: %w", helper, errdefs.ErrInvalidArgument)
	}
	if err := checkPath(s.Path); err != nil {
		return bad("Path", "%v", err)
	}
	if len(s.Args) == 0 {
		return bad("Args", "empty (Args[0] is required)")
	}
	root := os.Geteuid() == 0
	if root && !s.KeepRoot && (s.UID == 0 || s.GID == 0) {
		return bad("UID", "uid %d gid %d: a root caller must give a non-zero uid and gid (see AllocUID)", s.UID, s.GID)
	}
	s.Binds = append([]Bind(nil), s.Binds...)
	seen := map[string]string{}
	for i := range s.Binds {
		b := &s.Binds[i]
		field := fmt.Sprintf("Binds[%d]", i)
		if err := checkPath(b.Host); err != nil {
			return bad(field+".Host", "%v", err)
		}
		if b.Inside == "" {
			b.Inside = b.Host
		}
		if err := checkPath(b.Inside); err != nil {
			return bad(field+".Inside", "%v", err)
		}
		if b.Inside == "/" || isSystemPath(b.Inside) {
			return bad(field+".Inside", "%q would cover the jail's / or a system directory", b.Inside)
		}
		if f, dup := seen[b.Inside]; dup {
			return bad(field+".Inside", "%q already used by %s", b.Inside, f)
		}
		seen[b.Inside] = field
	}
	// Parents are mounted before their children.
	sort.SliceStable(s.Binds, func(i, j int) bool { return depth(s.Binds[i].Inside) < depth(s.Binds[j].Inside) })
	for i, d := range s.Devices {
		field := fmt.Sprintf("Devices[%d]", i)
		if err := checkPath(d); err != nil {
			return bad(field, "%v", err)
		}
		if !strings.HasPrefix(d, "/dev/") || strings.Count(d, "/") != 2 {
			return bad(field, "%q: want /dev/<name>", d)
		}
		if f, dup := seen[d]; dup {
			return bad(field, "%q already used by %s", d, f)
		}
		seen[d] = field
	}
	if c := s.Cgroup; c != nil {
		if !cgroupNameRE.MatchString(c.Name) {
			return bad("Cgroup.Name", "%q: want 1 to 64 bytes of [A-Za-z0-9._-]", c.Name)
		}
		if c.MemoryMaxBytes < 0 || c.PidsMax < 0 {
			return bad("Cgroup", "negative limit")
		}
		if c.CPUWeight > 10000 {
			return bad("Cgroup.CPUWeight", "%d: want 1 to 10000", c.CPUWeight)
		}
		cc := *c
		s.Cgroup = &cc
	}
	if s.Rlimits == nil {
		s.Rlimits = DefaultRlimits()
	}
	for i, f := range s.ExtraFiles {
		if f == nil {
			return bad(fmt.Sprintf("ExtraFiles[%d]", i), "nil")
		}
	}
	s.Args = append([]string(nil), s.Args...)
	s.Env = append([]string{}, s.Env...)
	s.Devices = append([]string(nil), s.Devices...)
	s.Rlimits = append([]Rlimit{}, s.Rlimits...)
	s.ExtraFiles = append([]*os.File(nil), s.ExtraFiles...)
	return &Cmd{helper: helper, spec: s, root: root}, nil
}

func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("required")
	case !filepath.IsAbs(p):
		return fmt.Errorf("%q is not absolute", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q is not clean (no //, /./, /../ or trailing /)", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q contains NUL", p)
	}
	return nil
}

func depth(p string) int { return strings.Count(p, "/") }

// isSystemPath reports whether p is or is inside a directory the jail fills
// itself. Binds may go below /tmp, a tmpfs of its own.
func isSystemPath(p string) bool {
	if p == "/tmp" {
		return true
	}
	for _, d := range append([]string{"/usr", "/dev", "/etc/ld.so.cache"}, libLinks...) {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Start creates the cgroup, starts the helper, places it in the cgroup and
// sends it the spec; it returns without waiting for the stage (see Ready).
//
// The helper runs in its own process group with Pdeathsig SIGKILL, which
// the stage re-arms after its uid change: the program dies when the OS
// thread that called Start exits. So call Start from a thread that lives as
// long as the program should (a dedicated locked thread); Start itself only
// forks there, plus a few cgroup file writes.
func (c *Cmd) Start() (err error) {
	if c.started {
		return fmt.Errorf("jail: Start called twice: %w", errdefs.ErrInvalidState)
	}
	c.started = true
	s := &c.spec

	if s.Cgroup != nil {
		if c.cg, err = createCgroup(s.Cgroup, &c.layers); err != nil {
			return err
		}
	} else {
		for _, l := range []*Layer{&c.layers.Memory, &c.layers.Pids, &c.layers.CPU} {
			l.Note = "Spec.Cgroup is nil"
		}
	}
	defer func() {
		if err != nil && c.cg != nil {
			c.cg.remove()
		}
	}()

	w := wireSpec{
		Path: s.Path, Args: s.Args, Env: s.Env,
		SetID: c.root && !s.KeepRoot, UID: s.UID, GID: s.GID,
		Binds: s.Binds, Devices: s.Devices, Rlimits: s.Rlimits,
		NExtra: len(s.ExtraFiles), PPid: os.Getpid(), Seccomp: true, DenySetID: s.DenySetID,
	}
	defer c.bindSources(&w)()
	var specW *os.File
	for _, mode := range c.nsAttempts() {
		var specR, statW *os.File
		if specR, specW, err = os.Pipe(); err != nil {
			return fmt.Errorf("jail: start: pipe: %v: %w", err, errdefs.ErrInternal)
		}
		if c.status, statW, err = os.Pipe(); err != nil {
			specR.Close()
			specW.Close()
			return fmt.Errorf("jail: start: pipe: %v: %w", err, errdefs.ErrInternal)
		}
		c.cmd = c.command(mode, specR, statW)
		err = c.cmd.Start()
		specR.Close()
		statW.Close()
		if err == nil {
			w.MountNS = mode != nsNone
			w.PIDNS = mode != nsNone && pidnsBlocked() == ""
			w.UserNS = mode == nsUser
			c.setNSLayers(mode)
			break
		}
		specW.Close()
		c.status.Close()
		if mode == nsNone || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOEXEC) {
			return fmt.Errorf("jail: start helper %s: %v: %w", c.helper, err, errnoKind(err))
		}
		c.layers.MountNS.Note = fmt.Sprintf("namespaces refused (%v)", err)
	}
	pid := c.cmd.Process.Pid
	if c.cg != nil {
		if err := c.cg.add(pid, &c.layers); err != nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
			specW.Close()
			c.status.Close()
			return err
		}
	}
	c.running = true
	b, _ := json.Marshal(w)
	go func() {
		// The stage reads the whole spec before it does anything; a write
		// error means it died, which Ready reports.
		specW.Write(b)
		specW.Close()
	}()
	return nil
}

// Namespace modes of the helper, tried in order by Start.
const (
	nsRoot = iota // mount, IPC, PID (and network) namespaces, as root
	nsUser        // the same inside a user namespace, for a non-root caller
	nsNone        // none: the host refused them
)

// nsAttempts lists the namespace modes to try, in order: a caller that the
// kernel refuses namespaces (no CAP_SYS_ADMIN, user namespaces disabled)
// still gets the other layers.
func (c *Cmd) nsAttempts() []int {
	if c.root {
		return []int{nsRoot, nsNone}
	}
	if why := usernsBlocked(); why != "" {
		c.layers.MountNS.Note = why
		return []int{nsNone}
	}
	return []int{nsUser, nsNone}
}

func (c *Cmd) command(mode int, specR, statW *os.File) *exec.Cmd {
	s := &c.spec
	fd := 3 + len(s.ExtraFiles)
	cmd := &exec.Cmd{
		Path:       c.helper,
		Args:       []string{c.helper, stageArg, strconv.Itoa(fd)},
		Env:        []string{},
		Stdout:     s.Stdout,
		Stderr:     s.Stderr,
		ExtraFiles: append(append(append([]*os.File(nil), s.ExtraFiles...), specR, statW), c.bindFiles...),
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
		WaitDelay: time.Second,
	}
	var flags uintptr
	if mode != nsNone {
		// A PID namespace of its own: the program is its pid 1 and sees
		// (and can signal) no process outside, even one of its own uid.
		flags |= unix.CLONE_NEWNS | unix.CLONE_NEWIPC
		if pidnsBlocked() == "" {
			flags |= unix.CLONE_NEWPID
		}
		if !s.HostNetwork {
			flags |= unix.CLONE_NEWNET
		}
	}
	if mode == nsUser {
		flags |= unix.CLONE_NEWUSER
		uid, gid := os.Getuid(), os.Getgid()
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		// The stage keeps CAP_SYS_ADMIN in its namespace across the exec
		// of the helper, to mount; it clears it before the program's execve.
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	cmd.SysProcAttr.Cloneflags = flags
	return cmd
}

func (c *Cmd) setNSLayers(mode int) {
	l := &c.layers
	if mode == nsNone {
		if l.MountNS.Note == "" {
			l.MountNS.Note = "no user namespace"
		}
		if !c.root {
			l.MountNS.Note = "not root and " + l.MountNS.Note
		}
		why := "no mount namespace: " + l.MountNS.Note
		l.PivotRoot.Note = why
		l.NetNS.Note = why
		l.IPCNS.Note = why
		l.PIDNS.Note = why
		return
	}
	how := "new namespace"
	if mode == nsUser {
		how = "new namespace inside a user namespace mapping the caller's uid and gid"
	}
	l.MountNS = Layer{Applied: true, Note: how}
	l.IPCNS = Layer{Applied: true, Note: how}
	l.PIDNS = Layer{Applied: true, Note: how + ", the program is its pid 1"}
	if why := pidnsBlocked(); why != "" {
		l.PIDNS = Layer{Note: why}
	}
	if c.spec.HostNetwork {
		l.NetNS.Note = "Spec.HostNetwork is set"
	} else {
		l.NetNS = Layer{Applied: true, Note: how + ", loopback only"}
	}
}

// Ready waits until the stage has executed the program, or failed (a
// *StageError naming the step; the helper then exits and Wait reaps it).
// It gives up after ReadyTimeout, kills the helper and returns a
// StageError wrapping errdefs.ErrTimeout. Ready may be called many times.
func (c *Cmd) Ready() error {
	if !c.running {
		return fmt.Errorf("jail: Ready without a successful Start: %w", errdefs.ErrInvalidState)
	}
	c.readyOnce.Do(func() { c.readyErr = c.ready() })
	return c.readyErr
}

func (c *Cmd) ready() error {
	defer c.status.Close()
	c.status.SetReadDeadline(time.Now().Add(ReadyTimeout))
	b, err := io.ReadAll(io.LimitReader(c.status, 1<<20))
	if err != nil {
		c.cmd.Process.Kill()
		return &StageError{Step: "waiting for the stage", Err: fmt.Errorf("%v: %w", err, errdefs.ErrTimeout)}
	}
	var last *wireStatus
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		var m wireStatus
		if json.Unmarshal([]byte(line), &m) != nil {
			return &StageError{Step: "status", Err: fmt.Errorf("bad status line %q", line)}
		}
		if m.Layers != nil {
			c.layers.merge(m.Layers)
		}
		last = &m
	}
	switch {
	case last == nil:
		return &StageError{Step: "stage", Err: fmt.Errorf("helper %s exited without reporting (does its main call jail.Main first?)", c.helper)}
	case last.Step != "":
		return &StageError{Step: last.Step, Err: &remoteErr{msg: last.Msg, no: syscall.Errno(last.Errno)}}
	}
	return nil
}

// Layers reports how the program is confined; complete once Ready returned.
func (c *Cmd) Layers() Layers { return c.layers }

// Process is the confined process (the helper, then the program in its
// place): its pid is the program's. Nil until Start succeeded.
func (c *Cmd) Process() *os.Process {
	if !c.running {
		return nil
	}
	return c.cmd.Process
}

// Args is the program's argv.
func (c *Cmd) Args() []string { return append([]string(nil), c.spec.Args...) }

// Wait waits for the program to exit, then removes its cgroup (killing
// whatever is left in it). It returns Ready's *StageError when the stage
// failed, otherwise what exec.Cmd.Wait returns. Wait may be called many
// times.
func (c *Cmd) Wait() error {
	if !c.running {
		return fmt.Errorf("jail: Wait without a successful Start: %w", errdefs.ErrInvalidState)
	}
	c.waitOnce.Do(func() {
		rerr := c.Ready()
		werr := c.cmd.Wait()
		if c.cg != nil {
			if err := c.cg.remove(); err != nil && werr == nil && rerr == nil {
				werr = err
			}
		}
		if rerr != nil {
			c.waitErr = rerr
		} else {
			c.waitErr = werr
		}
	})
	return c.waitErr
}

// remoteErr is an error sent by the stage: its text, and its errno if any.
type remoteErr struct {
	msg string
	no  syscall.Errno
}

func (e *remoteErr) Error() string { return e.msg }

func (e *remoteErr) Unwrap() error {
	if e.no == 0 {
		return nil
	}
	return e.no
}

// wireSpec is what the parent sends the stage on the spec pipe.
type wireSpec struct {
	Path    string
	Args    []string
	Env     []string
	SetID   bool // drop to UID/GID (the caller is root)
	UID     uint32
	GID     uint32
	Binds   []Bind
	Devices []string
	Rlimits []Rlimit
	NExtra  int
	PPid    int
	MountNS bool // the helper has its own mount namespace: build the root
	UserNS  bool
	PIDNS   bool // the helper is pid 1 of a namespace of its own
	Seccomp bool
	// Binds[i]'s source descriptor (0: a path), a detached mount if BindTrees[i].
	BindFDs   []int  `json:",omitempty"`
	BindTrees []bool `json:",omitempty"`
	DenySetID bool   `json:",omitempty"`
}

// wireStatus is one line the stage writes on the status pipe: its layers
// just before execve, or the step that failed.
type wireStatus struct {
	Layers *Layers `json:",omitempty"`
	Step   string  `json:",omitempty"`
	Errno  int     `json:",omitempty"`
	Msg    string  `json:",omitempty"`
}
