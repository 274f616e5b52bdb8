package boxlite

import (
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/image"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Option configures a Runtime.
type Option func(*runtimeOptions) error

type runtimeOptions struct {
	home       string
	assets     string
	mirrors    image.Mirrors // nil: from the environment
	insecure   []string      // nil: from the environment
	keychain   authn.Keychain
	registries []ImageRegistry // WithImageRegistries (registries.go)
	output     int64           // 0: DefaultOutputLimit
	qemu       string
	requireKVM bool
	maxBoots   int
	memReserve int64      // MiB; 0: defaultMemoryReserveMiB
	noTemplate *bool      // nil: from the environment
	memCap     int64      // MiB; 0: no cap (WithRunningMemoryCapMiB)
	pools      []poolSpec // WithWarmPool (pool.go)
	poolMemMiB int64      // 0: no bound (WithWarmPoolMemoryMiB)
	// pressure is the warm pools' source of memory pressure events (tests
	// inject one); nil: the host's PSI (poolpressure.go).
	pressure func() (pressureSource, error)
}

// WithHome sets the runtime's home directory. Default: $BOXLITE_HOME, else ~/.boxlite.
func WithHome(dir string) Option {
	return func(o *runtimeOptions) error {
		if dir == "" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "home directory is empty")
		}
		o.home = dir
		return nil
	}
}

// WithAssets sets where boxlite-shim, boxlite-net, virtiofsd and
// guest/{vmlinuz,initramfs.cpio} are. Default: $BOXLITE_ASSETS, else the
// first of these that has them all: the directory of the running
// executable, lib/boxlite beside its bin/ directory (PREFIX/bin/PROGRAM and
// PREFIX/lib/boxlite), /usr/local/lib/boxlite (`make install`), /usr/lib/boxlite.
func WithAssets(dir string) Option {
	return func(o *runtimeOptions) error { o.assets = dir; return nil }
}

// WithRegistryMirrors sets the registry mirrors that pulls try first, in
// order, before the registry itself: each "REGISTRY=URL", or a
// comma-separated list of them, e.g. "docker.io=http://127.0.0.1:5000"
// (http:// is plain HTTP). See image.Mirrors. Default: $BOXLITE_REGISTRY_MIRRORS
// in the same form; none when unset.
func WithRegistryMirrors(specs ...string) Option {
	return func(o *runtimeOptions) error {
		m, err := image.ParseMirrors(strings.Join(specs, ","))
		if err != nil {
			return err
		}
		o.mirrors = m // not nil, even when empty
		return nil
	}
}

// WithInsecureRegistries lets pulls reach these registries ("host[:port]")
// over plain HTTP, or TLS with any certificate. Default:
// $BOXLITE_INSECURE_REGISTRIES, comma-separated; none when unset (not even
// localhost).
func WithInsecureRegistries(hosts ...string) Option {
	return func(o *runtimeOptions) error {
		o.insecure = append([]string{}, hosts...) // not nil, even when empty
		return nil
	}
}

// WithRegistryKeychain sets where pulls find credentials. Default:
// authn.DefaultKeychain (the docker config and its credential helpers).
func WithRegistryKeychain(k authn.Keychain) Option {
	return func(o *runtimeOptions) error { o.keychain = k; return nil }
}

// WithOutputLimit caps how many bytes of each output stream a collected
// result keeps (Box.Run, session cells, shell session commands); the rest is
// dropped and the result is marked truncated. Default DefaultOutputLimit
// (64 MiB per stream).
func WithOutputLimit(bytes int64) Option {
	return func(o *runtimeOptions) error {
		if bytes <= 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "output limit %d is not positive", bytes)
		}
		o.output = bytes
		return nil
	}
}

// WithQEMU sets the VMM binary boxes run under. Default: $BOXLITE_QEMU, else
// qemu-system-x86_64 on PATH.
func WithQEMU(path string) Option {
	return func(o *runtimeOptions) error { o.qemu = path; return nil }
}

// WithRequireKVM makes box starts fail (ErrUnsupported) on a host without
// hardware virtualization instead of falling back to TCG: QEMU's emulator is
// not a security boundary. Default: fall back, and say so in box info. Also
// set by BOXLITE_ACCEL=kvm.
func WithRequireKVM() Option {
	return func(o *runtimeOptions) error { o.requireKVM = true; return nil }
}

// WithMaxConcurrentBoots sets how many boxes may boot at once across the
// processes sharing the home; more starts wait their turn (bounded by their
// context), and each box's boot timeout counts from when its boot begins.
// Default: one per CPU. Measured on 2 cores: 20 boxes at once came up in
// 75 s with 2 slots and 55 s with 8, but 50 boxes took 368 s with 2 and
// 544 s with 8 (idle VMs and boots thrash), and execs into running boxes
// kept a p99 under 1 s only with 2.
func WithMaxConcurrentBoots(n int) Option {
	return func(o *runtimeOptions) error {
		if n < 1 || n > 4096 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "max concurrent boots %d is outside 1..4096", n)
		}
		o.maxBoots = n
		return nil
	}
}

// WithHostMemoryReserveMiB sets how much of the host's available memory box
// starts leave alone: a boot waits (bounded by its context, then ErrLimit)
// until MemAvailable, less the boots in flight and this reserve, covers the
// box's memory plus its VMM's overhead. Default: a twentieth of the host's
// memory, at least 256 MiB.
func WithHostMemoryReserveMiB(n int64) Option {
	return func(o *runtimeOptions) error {
		if n < 1 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "host memory reserve %d MiB: must be at least 1", n)
		}
		o.memReserve = n
		return nil
	}
}

// WithTemplates turns warm starts on or off. On, a box's first start
// restores the VM from the template of its shape (image, memory, CPUs,
// network, kernel arguments, disk size) instead of booting it, and the
// first box of a shape makes that template (a boot, then about 0.1 s to
// save it); boxes with volumes always boot. Default: on, unless
// $BOXLITE_TEMPLATES is "0" or "off".
func WithTemplates(on bool) Option {
	return func(o *runtimeOptions) error {
		off := !on
		o.noTemplate = &off
		return nil
	}
}

// pullOptions turns the registry settings into image.PullOptions, reading
// the environment for those not given.
func (o *runtimeOptions) pullOptions() ([]image.PullOption, error) {
	if o.mirrors == nil {
		m, err := image.ParseMirrors(os.Getenv("BOXLITE_REGISTRY_MIRRORS"))
		if err != nil {
			return nil, fmt.Errorf("BOXLITE_REGISTRY_MIRRORS: %w", err)
		}
		o.mirrors = m
	}
	if o.insecure == nil {
		for _, h := range strings.Split(os.Getenv("BOXLITE_INSECURE_REGISTRIES"), ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.insecure = append(o.insecure, h)
			}
		}
	}
	mirrors, insecure, keychain, err := o.registryPullOptions(o.mirrors, o.insecure, o.keychain)
	if err != nil {
		return nil, err
	}
	opts := []image.PullOption{image.WithMirrors(mirrors), image.WithInsecure(insecure...)}
	if keychain != nil {
		opts = append(opts, image.WithKeychain(keychain))
	}
	return opts, nil
}

// BoxOption configures a box at creation.
type BoxOption func(*BoxConfig) error

// BoxConfig is a box's creation-time configuration, kept in its directory.
type BoxConfig struct {
	Image       string            `json:"image"`
	Name        string            `json:"name,omitempty"`
	MemoryMiB   int               `json:"memory_mib"`
	CPUs        int               `json:"cpus"`
	DiskSizeGB  int               `json:"disk_size_gb"`
	Env         map[string]string `json:"env,omitempty"`
	WorkingDir  string            `json:"working_dir,omitempty"`
	User        string            `json:"user,omitempty"`
	BootTimeout time.Duration     `json:"boot_timeout"`
	AutoRemove  bool              `json:"auto_remove"` // absent in a record written before it defaulted to true: false
	// Detach: the box is not tied to the process that starts it (see WithDetach).
	Detach bool `json:"detach,omitempty"`
	// Entrypoint and Cmd override the image's (nil: the image's); see Box.DefaultCommand.
	Entrypoint []string    `json:"entrypoint,omitempty"`
	Cmd        []string    `json:"cmd,omitempty"`
	Network    NetworkSpec `json:"network"`
	Ports      []Port      `json:"ports,omitempty"`
	Volumes    []Volume    `json:"volumes,omitempty"` // volume.go
	KernelArgs []string    `json:"kernel_args,omitempty"`
	// Hostname is the box's (see WithHostname); empty: DefaultHostname.
	Hostname string `json:"hostname,omitempty"`
	// Prestart names the sessions a box started from a template finds
	// started (see WithPrestart).
	Prestart []string `json:"prestart,omitempty"`
	// AutoPause: the box pauses itself after this long idle (see
	// WithAutoPause); 0: never.
	AutoPause time.Duration `json:"auto_pause,omitempty"`
	// Secrets the box uses without holding them (secrets.go); their
	// values are kept apart, in the box's secrets file.
	Secrets []Secret `json:"secrets,omitempty"`
	// Capabilities and Security: BoxLite's AdvancedBoxOptions (advanced.go);
	// nil: the defaults. HealthCheck: health.go.
	Capabilities *Capabilities    `json:"capabilities,omitempty"`
	Security     *SecurityOptions `json:"security,omitempty"`
	HealthCheck  *HealthCheck     `json:"health_check,omitempty"`
}

// DefaultHostname is a box's hostname unless WithHostname sets one, as in
// BoxLite.
const DefaultHostname = abi.DefaultHostname

func defaultBoxConfig(image string) BoxConfig {
	return BoxConfig{Image: image, MemoryMiB: abi.DefaultMemoryMiB, CPUs: abi.DefaultCPUs, DiskSizeGB: abi.DefaultDiskSizeGB,
		BootTimeout: abi.DefaultBootTimeout, AutoRemove: abi.DefaultAutoRemove}
}

// WithKernelArgs adds words to the guest kernel's command line, for
// debugging the guest (say "loglevel=7") or tuning it ("sysctl.vm.swappiness=10").
// Each is one word of printable ASCII. They come after the kernel defaults
// (console, quiet, panic=-1, the clock's), so they override those (a box
// with panic=0 hangs rather than stops when its kernel panics); boxlite's
// own boxlite.* words cannot be set, nor init= or rdinit= (the guest's first
// process is boxlite's agent); at most 32 words and 512 bytes. Default: none.
func WithKernelArgs(args ...string) BoxOption {
	return func(c *BoxConfig) error { c.KernelArgs = append(c.KernelArgs, args...); return nil }
}

// maxKernelArgs bounds what WithKernelArgs adds (the whole line has 2047
// bytes), in bytes and in words.
const (
	maxKernelArgs     = 512
	maxKernelArgWords = 32
)

func validKernelArgs(args []string) error {
	if len(args) > maxKernelArgWords {
		return fmt.Errorf("%d kernel arguments, at most %d", len(args), maxKernelArgWords)
	}
	n := 0
	for _, a := range args {
		n += len(a) + 1
		key, _, _ := strings.Cut(a, "=")
		switch {
		case a == "":
			return fmt.Errorf("kernel argument is empty")
		case strings.IndexFunc(a, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' }) >= 0:
			return fmt.Errorf("kernel argument %q: one word of printable ASCII without quotes, please", a)
		case strings.HasPrefix(a, protocol.KernelWordPrefix):
			return fmt.Errorf("kernel argument %q: boxlite.* words are boxlite's own", a)
		case key == "init" || key == "rdinit":
			return fmt.Errorf("kernel argument %q: the guest's first process is boxlite's agent (without it the box never becomes ready)", a)
		}
	}
	if n > maxKernelArgs {
		return fmt.Errorf("kernel arguments take %d bytes, at most %d", n, maxKernelArgs)
	}
	return nil
}

// MaxBootTimeout bounds WithBootTimeout: a boot's CPU budget, whose wall
// clock bound is ten times it, so no box config makes a start wait for
// more than MaxBootTimeout*10 (under two hours).
const MaxBootTimeout = abi.MaxBootTimeout

// maxImageRef bounds an image reference (a registry, a repository of
// up to 255 bytes, a tag of up to 128, a digest).
const maxImageRef = 512

// validImageRef checks that ref names an image the way the store looks
// images up: a reference ([REGISTRY/]REPOSITORY[:TAG][@DIGEST], as
// go-containerregistry parses it), a digest (sha256:HEX, or a prefix of
// one) or 12 to 64 hex digits of one. An image name is shown by `boxlite
// ls` and box info: whatever it is, it carries no control character.
func validImageRef(ref string) error {
	if len(ref) > maxImageRef {
		return fmt.Errorf("image reference of %d bytes, at most %d", len(ref), maxImageRef)
	}
	if strings.IndexFunc(ref, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return fmt.Errorf("image reference %q: printable ASCII without spaces, please", ref)
	}
	if h, ok := strings.CutPrefix(ref, "sha256:"); ok {
		if h != "" && len(h) <= 64 && isLowerHex(h) {
			return nil
		}
		return fmt.Errorf("image reference %q: a digest is sha256:<up to 64 hex digits>", ref)
	}
	if len(ref) >= 12 && len(ref) <= 64 && isLowerHex(ref) {
		return nil
	}
	if _, err := name.ParseReference(ref); err != nil {
		return fmt.Errorf("image reference %q: %v", ref, err)
	}
	return nil
}

func isLowerHex(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') }) < 0
}

// validText refuses control characters in a short setting shown as it is
// (a user name, a working directory).
func validText(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 }) < 0
}

// WithName names the box; names are unique in a home. Default: none.
func WithName(name string) BoxOption {
	return func(c *BoxConfig) error { c.Name = name; return nil }
}

// WithMemoryMiB sets guest memory. Default 512.
func WithMemoryMiB(n int) BoxOption {
	return func(c *BoxConfig) error { c.MemoryMiB = n; return nil }
}

// WithCPUs sets the vCPU count. Default 1.
func WithCPUs(n int) BoxOption {
	return func(c *BoxConfig) error { c.CPUs = n; return nil }
}

// WithDiskSizeGB sizes the box's writable disk (sparse). Default 4.
func WithDiskSizeGB(n int) BoxOption {
	return func(c *BoxConfig) error { c.DiskSizeGB = n; return nil }
}

// WithEnv adds KEY=VALUE to every process of the box. Default: the image's env only.
func WithEnv(key, value string) BoxOption {
	return func(c *BoxConfig) error {
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		c.Env[key] = value
		return nil
	}
}

// WithWorkingDir sets the default cwd of processes. Default: the image's WorkingDir, else /.
func WithWorkingDir(dir string) BoxOption {
	return func(c *BoxConfig) error { c.WorkingDir = dir; return nil }
}

// WithHostname sets the box's hostname: one DNS label of 1 to 64 bytes
// ([A-Za-z0-9-], not starting or ending with -). Default: DefaultHostname
// ("boxlite"). Every box gets its own when it starts, a box started from a
// template too.
func WithHostname(name string) BoxOption {
	return func(c *BoxConfig) error {
		if !protocol.ValidHostname(name) {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "hostname %q: want 1 to 64 bytes of [A-Za-z0-9-], not starting or ending with -", name)
		}
		c.Hostname = name
		return nil
	}
}

// Prestart kinds (WithPrestart).
const (
	PrestartPython = "python" // NewPythonSession's interpreter, its driver loaded
	PrestartShell  = "shell"  // NewShellSession's /bin/sh; "shell:PATH" names another shell
)

// WithPrestart asks for sessions that are already started when the box
// starts from a template: the template VM starts them before it is saved,
// so the box's first NewPythonSession or NewShellSession with default
// options (no env, cwd, user or interpreter of its own) takes over a
// started interpreter instead of waiting for one. CodeBox and
// InteractiveBox in the SDKs ask for theirs. Boxes with their own env,
// working directory or user, and boxes that boot (templates off, volumes,
// a later start), start their sessions as usual. Every box of the
// template shares the interpreter's start: Python's hash seed and the
// address layout (the random module is reseeded on the first cell).
// Default: none.
func WithPrestart(kinds ...string) BoxOption {
	return func(c *BoxConfig) error { c.Prestart = append(c.Prestart, kinds...); return nil }
}

func validPrestart(kinds []string) error {
	if len(kinds) > 2 {
		return fmt.Errorf("prestart lists %d sessions, at most 2 (python, shell)", len(kinds))
	}
	seen := map[string]bool{}
	for _, k := range kinds {
		kind, shell, custom := strings.Cut(k, ":")
		switch {
		case kind == PrestartPython && !custom:
		case kind == PrestartShell && (!custom || path.IsAbs(shell) && len(shell) <= 256 && !strings.ContainsRune(shell, 0)):
		default:
			return fmt.Errorf("prestart %q: want %q, %q or \"shell:/ABSOLUTE/PATH\"", k, PrestartPython, PrestartShell)
		}
		if seen[kind] {
			return fmt.Errorf("prestart lists %s twice", kind)
		}
		seen[kind] = true
	}
	return nil
}

// WithUser sets the default user of processes. Default: the image's User, else root.
func WithUser(user string) BoxOption {
	return func(c *BoxConfig) error { c.User = user; return nil }
}

// WithBootTimeout bounds VMM start to agent ready by the CPU time the VMM
// uses, and the wall-clock wait by 10 times that (a guest starved by other
// boxes is slow, not stuck). Default abi.DefaultBootTimeout (60s: TCG is
// slow); at most MaxBootTimeout (10 minutes).
func WithBootTimeout(d time.Duration) BoxOption {
	return func(c *BoxConfig) error { c.BootTimeout = d; return nil }
}

// WithAutoRemove(true) removes the box when it stops (Box.Stop, its VM
// exiting, or, unless detached, its creator's exit), never while it is
// merely configured; later calls on a box removed so name why its run
// ended; WithAutoRemove(false) keeps it, stopped, until
// Box.Remove. Default abi.DefaultAutoRemove (true, as BoxLite's): a box that
// is to be stopped and started again needs WithAutoRemove(false).
func WithAutoRemove(remove bool) BoxOption {
	return func(c *BoxConfig) error { c.AutoRemove = remove; return nil }
}

// WithDetach lets the box outlive the process that starts it, as docker's
// -d does: its shim is not tied to that process, Runtime.Close leaves it
// running, and any process reattaches by id or name (Runtime.Get) to the
// same VM; Box.Stop or Remove with force ends it. Default: the box stops
// when the runtime that started it closes or its process dies.
func WithDetach() BoxOption {
	return func(c *BoxConfig) error { c.Detach = true; return nil }
}

// WithEntrypoint overrides the image's ENTRYPOINT (and drops its CMD, as
// docker's --entrypoint does) for what a bare exec runs (Box.DefaultCommand).
// Default: the image's.
func WithEntrypoint(argv ...string) BoxOption {
	return func(c *BoxConfig) error { c.Entrypoint = append([]string{}, argv...); return nil }
}

// WithCmd overrides the image's CMD, the arguments after the entrypoint of
// what a bare exec runs (Box.DefaultCommand). Default: the image's.
func WithCmd(argv ...string) BoxOption {
	return func(c *BoxConfig) error { c.Cmd = append([]string{}, argv...); return nil }
}

// validate rejects bad and conflicting settings in one place: the SDKs
// check types only, so each message names the option as the wire does.
func (c *BoxConfig) validate() error {
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "box options: "+format, args...)
	}
	switch {
	case c.Image == "":
		return bad("image is empty")
	case c.MemoryMiB < abi.MinMemoryMiB || c.MemoryMiB > abi.MaxMemoryMiB:
		return bad("memory (memory_mib) %d MiB is outside %d..%d", c.MemoryMiB, abi.MinMemoryMiB, abi.MaxMemoryMiB)
	case c.CPUs < abi.MinCPUs || c.CPUs > abi.MaxCPUs:
		return bad("cpus %d is outside %d..%d", c.CPUs, abi.MinCPUs, abi.MaxCPUs)
	case c.DiskSizeGB < abi.MinDiskSizeGB || c.DiskSizeGB > abi.MaxDiskSizeGB:
		return bad("disk size (disk_size_gb) %d GB is outside %d..%d", c.DiskSizeGB, abi.MinDiskSizeGB, abi.MaxDiskSizeGB)
	case c.BootTimeout <= 0 || c.BootTimeout > MaxBootTimeout:
		return bad("boot timeout (boot_timeout_secs) %s is outside 0..%s", c.BootTimeout, MaxBootTimeout)
	case c.Name != "" && !validName(c.Name):
		return bad("name %q must be 1-64 of [a-zA-Z0-9_.-] and start with a letter or digit", c.Name)
	case !validText(c.User) || !validText(c.WorkingDir):
		return bad("user %q or working directory %q has a control character", c.User, c.WorkingDir)
	}
	if err := validImageRef(c.Image); err != nil {
		return bad("%v", err)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("env key %q is invalid", k)
		}
	}
	if err := validKernelArgs(c.KernelArgs); err != nil {
		return bad("%v", err)
	}
	if err := validPrestart(c.Prestart); err != nil {
		return bad("%v", err)
	}
	if len(c.Entrypoint) > 0 && c.Entrypoint[0] == "" {
		return bad("entrypoint's executable is empty")
	}
	if len(c.Entrypoint) == 0 && len(c.Cmd) > 0 && c.Cmd[0] == "" {
		return bad("cmd's first word is empty")
	}
	if err := c.validateVolumes(); err != nil {
		return err
	}
	if err := c.validateAutoPause(bad); err != nil {
		return err
	}
	if err := c.validateNetwork(bad); err != nil {
		return err
	}
	return c.validateSecrets(bad, false)
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("_.-", r)) {
			return false
		}
	}
	return true
}

func (c *BoxConfig) String() string {
	return fmt.Sprintf("%s (%d MiB, %d cpu)", c.Image, c.MemoryMiB, c.CPUs)
}
