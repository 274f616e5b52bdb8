// Command boxlite runs commands in microVM boxes. See `boxlite help`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

type multi []string

// parseVolume reads -v HOST:GUEST[:OPTIONS], as docker does; OPTIONS are
// comma-separated: ro or rw, and size=N (bytes, or with a k, m, g or t
// suffix, powers of 1024) for a size limit.
func parseVolume(s string) (boxlite.Volume, error) {
	bad := func() (boxlite.Volume, error) {
		return boxlite.Volume{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "-v %q: want HOST:GUEST[:ro|:rw][,size=N[k|m|g|t]]", s)
	}
	f := strings.Split(s, ":")
	if len(f) < 2 || len(f) > 3 {
		return bad()
	}
	v := boxlite.Volume{HostPath: f[0], GuestPath: f[1]}
	if len(f) == 3 {
		for _, o := range strings.Split(f[2], ",") {
			switch {
			case o == "ro" || o == "rw":
				v.ReadOnly = o == "ro"
			case strings.HasPrefix(o, "size="):
				n, ok := parseBytes(strings.TrimPrefix(o, "size="))
				if !ok {
					return bad()
				}
				v.SizeLimitBytes = n
			default:
				return bad()
			}
		}
	}
	return v, nil
}

// parseBytes reads N with an optional k, m, g or t suffix (powers of 1024,
// any case, an optional trailing "b" or "ib").
func parseBytes(s string) (int64, bool) {
	s = strings.ToLower(s)
	s = strings.TrimSuffix(strings.TrimSuffix(s, "b"), "i")
	mult := int64(1)
	if i := strings.IndexAny(s, "kmgt"); i >= 0 && i == len(s)-1 {
		mult = 1 << (10 * (1 + strings.IndexByte("kmgt", s[i])))
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// boxFlags are the box options create and run share.
type boxFlags struct {
	name                 *string
	memory, cpus, disk   *int
	network, entrypoint  *string
	allowNet, ports, vol multi
	secrets              multi
	// Advanced options (docs/security-options.md), docker's flag names.
	capAdd, capDrop multi
	security        *string
	healthCmd       *string
	healthInterval  *float64
	healthTimeout   *float64
	healthRetries   *int
	healthStart     *float64
}

func addBoxFlags(fs *flag.FlagSet) *boxFlags {
	f := &boxFlags{
		name:       fs.String("name", "", "box `NAME`"),
		memory:     fs.Int("memory", 512, "guest memory in `MIB`"),
		cpus:       fs.Int("cpus", 1, "`N` vCPUs"),
		disk:       fs.Int("disk-size", 4, "writable disk size in `GB` (sparse)"),
		network:    fs.String("network", "", "`enabled` (default) or disabled (only lo)"),
		entrypoint: fs.String("entrypoint", "", "override the image's entrypoint with `EXEC` (and drop its cmd)"),
	}
	fs.Var(&f.allowNet, "allow-net", "`ENTRY`: where the box may connect: names, *.wildcards, IPs, CIDRs, with :port (repeatable or comma-separated)")
	fs.Var(&f.ports, "p", "publish a `PORT`: [[IP:]HOST:]GUEST[/tcp|udp] (repeatable; HOST 0 or none picks one)")
	fs.Var(&f.vol, "v", "`VOLUME` HOST:GUEST[:ro|:rw][,size=N[k|m|g|t]] (repeatable)")
	fs.Var(&f.secrets, "secret", "a `SECRET` the box never holds: NAME=VALUE@HOST[,HOST] (NAME@HOST: VALUE from $NAME); repeatable")
	fs.Var(&f.capAdd, "cap-add", "add a Linux `CAPABILITY` to the box's processes (repeatable or comma-separated; ALL)")
	fs.Var(&f.capDrop, "cap-drop", "drop a Linux `CAPABILITY` from the box's processes (repeatable or comma-separated; ALL)")
	f.security = fs.String("security", "", "isolation `PRESET`: development, standard (default) or maximum (docs/security-options.md)")
	f.healthCmd = fs.String("health-cmd", "", "a health check: `CMD` run with sh -c in the box by its shim; info's health_status reports it")
	f.healthInterval = fs.Float64("health-interval", 0, "`SECONDS` between health checks (default 30)")
	f.healthTimeout = fs.Float64("health-timeout", 0, "`SECONDS` a health check may take (default 10)")
	f.healthRetries = fs.Int("health-retries", 0, "failed health checks in a row, `N`, that make the box unhealthy (default 3)")
	f.healthStart = fs.Float64("health-start-period", -1, "`SECONDS` after the box is ready when failed checks do not count (default 60)")
	return f
}

// advanced is the advanced options the flags give; nil: none.
func (f *boxFlags) advanced() (*abi.Advanced, error) {
	a := &abi.Advanced{}
	split := func(m multi) []string {
		var out []string
		for _, v := range m {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
		}
		return out
	}
	if add, drop := split(f.capAdd), split(f.capDrop); len(add)+len(drop) > 0 {
		a.Capabilities = &abi.Capabilities{Add: add, Drop: drop}
	}
	if *f.security != "" {
		var s boxlite.SecurityOptions
		switch *f.security {
		case "development":
			s = boxlite.SecurityDevelopment()
		case "standard":
			s = boxlite.SecurityStandard()
		case "maximum":
			s = boxlite.SecurityMaximum()
		default:
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "--security %q: want development, standard or maximum", *f.security)
		}
		a.Security = &abi.Security{JailerEnabled: &s.JailerEnabled, SeccompEnabled: &s.SeccompEnabled, MaxOpenFiles: s.MaxOpenFiles,
			MaxFileSize: s.MaxFileSize, MaxProcesses: s.MaxProcesses, NetworkEnabled: &s.NetworkEnabled, CloseFDs: &s.CloseFDs}
	}
	health := *f.healthCmd != "" || *f.healthInterval != 0 || *f.healthTimeout != 0 || *f.healthRetries != 0 || *f.healthStart >= 0
	if health {
		if *f.healthCmd == "" {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "--health-interval, --health-timeout, --health-retries and --health-start-period need --health-cmd")
		}
		h := &abi.HealthCheck{Command: []string{"sh", "-c", *f.healthCmd}}
		secs := func(v float64) *abi.Seconds { s := abi.Seconds(v); return &s }
		if *f.healthInterval != 0 {
			h.IntervalSecs = secs(*f.healthInterval)
		}
		if *f.healthTimeout != 0 {
			h.TimeoutSecs = secs(*f.healthTimeout)
		}
		if *f.healthStart >= 0 {
			h.StartPeriodSecs = secs(*f.healthStart)
		}
		if *f.healthRetries != 0 {
			h.Retries = f.healthRetries
		}
		a.HealthCheck = h
	}
	if a.Capabilities == nil && a.Security == nil && a.HealthCheck == nil {
		return nil, nil
	}
	return a, nil
}

// options are the flags as the create options of imageRef: the one form
// both runtimes take (the local one through convert.BoxOptions, a server
// its own way), each validating them once.
func (f *boxFlags) options(imageRef string) (abi.BoxOptions, error) {
	o := abi.BoxOptions{Image: imageRef, Name: *f.name, MemoryMiB: f.memory, CPUs: f.cpus, DiskSizeGB: f.disk}
	if *f.entrypoint != "" {
		o.Entrypoint = []string{*f.entrypoint}
	}
	var err error
	if o.Network, o.Ports, err = networkOptions(*f.network, f.allowNet, f.ports); err != nil {
		return abi.BoxOptions{}, err
	}
	for _, v := range f.vol {
		vol, err := parseVolume(v)
		if err != nil {
			return abi.BoxOptions{}, err
		}
		o.Volumes = append(o.Volumes, abi.Volume{HostPath: vol.HostPath, GuestPath: vol.GuestPath, ReadOnly: vol.ReadOnly, SizeLimitBytes: vol.SizeLimitBytes})
	}
	for _, s := range f.secrets {
		sec, err := parseSecret(s, os.Getenv)
		if err != nil {
			return abi.BoxOptions{}, err
		}
		o.Secrets = append(o.Secrets, sec)
	}
	if o.Advanced, err = f.advanced(); err != nil {
		return abi.BoxOptions{}, err
	}
	return o, nil
}

// parseSecret parses --secret NAME=VALUE@HOST[,HOST...]: the hosts follow
// the last '@' (a value may hold '@' and '='); NAME@HOST takes the value
// from the environment variable NAME, so that it is not on the command
// line (which every process of the host may read).
func parseSecret(s string, getenv func(string) string) (abi.Secret, error) {
	bad := func(why string) (abi.Secret, error) {
		return abi.Secret{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "--secret NAME=VALUE@HOST[,HOST]: %s", why)
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 || at == len(s)-1 {
		return bad("no @HOST")
	}
	sec := abi.Secret{}
	for _, h := range strings.Split(s[at+1:], ",") {
		if h = strings.TrimSpace(h); h != "" {
			sec.Hosts = append(sec.Hosts, h)
		}
	}
	name, value, ok := strings.Cut(s[:at], "=")
	if !ok {
		if value = getenv(name); value == "" {
			return bad(fmt.Sprintf("no =VALUE, and $%s is empty", name))
		}
	}
	if name == "" {
		return bad("no NAME")
	}
	sec.Name, sec.Value = name, value
	return sec, nil
}

// execFlags are the process options exec and run share.
type execFlags struct {
	workdir, user *string
	timeout       *float64
	stdin, tty    *bool
	env           multi
}

func addExecFlags(fs *flag.FlagSet) *execFlags {
	f := &execFlags{
		workdir: fs.String("w", "", "working `DIR` in the box"),
		user:    fs.String("u", "", "`USER` (name, uid or uid:gid)"),
		timeout: fs.Float64("timeout", 0, "kill the command after `SECONDS` (TERM, then KILL 2s later)"),
		stdin:   fs.Bool("i", false, "forward standard input"),
		tty:     fs.Bool("t", false, "run the command on a terminal (with -i on a terminal: raw mode, size followed)"),
	}
	fs.Var(&f.env, "e", "environment `KEY=VALUE` (repeatable)")
	return f
}

// command is the process the flags describe (argv empty: the box's
// entrypoint and cmd).
func (f *execFlags) command(argv []string) (boxlite.Command, error) {
	if *f.timeout < 0 {
		return boxlite.Command{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "--timeout %v is negative", *f.timeout)
	}
	return boxlite.Command{Argv: argv, Env: envMap(f.env), Cwd: *f.workdir, User: *f.user,
		Timeout: time.Duration(*f.timeout * float64(time.Second)), Stdin: *f.stdin, Tty: *f.tty}, nil
}

// envMap reads -e KEY=VALUE flags; -e KEY passes the host's value, as docker does.
func envMap(kvs []string) map[string]string {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			v = os.Getenv(k)
		}
		env[k] = v
	}
	return env
}

// splitShortFlags turns combined one-letter boolean flags such as -it into
// -i -t (the flag package takes -it for one flag named "it"), up to IMAGE.
func splitShortFlags(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil {
			out = append(out, a)
			if !hasValue && !isBoolFlag(f) && i+1 < len(args) {
				i++
				out = append(out, args[i]) // the flag's value
			}
			continue
		}
		split := !strings.HasPrefix(a, "--") && !hasValue
		for _, c := range name {
			if !isBoolFlag(fs.Lookup(string(c))) {
				split = false
				break
			}
		}
		if !split {
			out = append(out, a) // let Parse report it
			continue
		}
		for _, c := range name {
			out = append(out, "-"+string(c))
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
