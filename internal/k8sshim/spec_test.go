package k8sshim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/boxlite/boxlite/errdefs"
)

func TestCheckID(t *testing.T) {
	for _, id := range []string{"t1", "a.b-c_d", strings.Repeat("a", 76), "0"} {
		if err := checkID("id", id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", "..", "../x", "a/b", "-a", "a-", "a..b", "a b", strings.Repeat("a", 77), "a\x00"} {
		if err := checkID("id", id); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: got %v, want invalid argument", id, err)
		}
	}
}

func writeSpec(t *testing.T, js string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadSpec(t *testing.T) {
	dir := writeSpec(t, `{"process":{"terminal":true,"consoleSize":{"height":30,"width":100},
		"user":{"uid":1000,"gid":100},"args":["sh","-c","echo hi"],"env":["A=1","B=x=y","A=2"],"cwd":"/tmp"},
		"root":{"path":"rootfs","readonly":true},"hostname":"pod1",
		"annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-id":"sb1"},
		"linux":{"resources":{"memory":{"limit":268435456},"cpu":{"quota":150000,"period":100000}}}}`)
	s, err := readSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Process
	if env := p.env(); env["A"] != "2" || env["B"] != "x=y" {
		t.Errorf("env %v", env)
	}
	if p.user() != "1000:100" || p.Cwd != "/tmp" || !p.Terminal || p.ConsoleSize.Width != 100 {
		t.Errorf("process %+v", p)
	}
	if sb, err := s.sandboxOf("c1"); err != nil || sb != "sb1" {
		t.Errorf("sandbox %q %v", sb, err)
	}
	if !s.hostNetwork() {
		t.Error("no network namespace in the spec: the host's network")
	}
	if mem, cpus := s.boxShape(); mem != 256+guestOverheadMiB || cpus != 2 {
		t.Errorf("shape %d MiB %d cpus", mem, cpus)
	}
}

func TestBoxShapeFromPodAnnotations(t *testing.T) {
	s, err := readSpec(writeSpec(t, `{"process":{"args":["true"]},"annotations":{"io.kubernetes.cri.sandbox-memory":"1073741824",
		"io.kubernetes.cri.sandbox-cpu-quota":"250000","io.kubernetes.cri.sandbox-cpu-period":"100000"},
		"linux":{"resources":{"memory":{"limit":1048576}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if mem, cpus := s.boxShape(); mem != 1024+guestOverheadMiB || cpus != 3 {
		t.Errorf("shape %d MiB %d CPUs, want the pod's 1024+128 MiB and 3 CPUs", mem, cpus)
	}
	s.Annotations["io.kubernetes.cri.sandbox-memory"] = "-5"
	if mem, _ := s.boxShape(); mem != 1+guestOverheadMiB {
		t.Errorf("a bad annotation: %d MiB, want the spec's limit", mem)
	}
}

func TestHostNetwork(t *testing.T) {
	s, err := readSpec(writeSpec(t, `{"process":{"args":["true"]},"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.hostNetwork() {
		t.Error("a network namespace of its own taken for the host's")
	}
}

func TestSpecDefaultsAndErrors(t *testing.T) {
	s, err := readSpec(writeSpec(t, `{"process":{"args":["true"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if mem, cpus := s.boxShape(); mem != defaultContainerMiB+guestOverheadMiB || cpus != 1 {
		t.Errorf("default shape %d %d", mem, cpus)
	}
	if sb, _ := s.sandboxOf("c1"); sb != "c1" {
		t.Errorf("a container outside CRI is its own pod, got %q", sb)
	}
	for js, kind := range map[string]error{
		`{"process":{"args":[]}}`:                   errdefs.ErrInvalidArgument,
		`{"root":{"path":"r"}}`:                     errdefs.ErrInvalidArgument,
		`{"process":{"args":["x"],"cwd":"rel"}}`:    errdefs.ErrInvalidArgument,
		`{"process":{"args":["x"],"env":["NOEQ"]}}`: errdefs.ErrInvalidArgument,
		`not json`: errdefs.ErrInvalidArgument,
		`{"process":{"args":["x"]},"annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-id":"../x"}}`: errdefs.ErrInvalidArgument,
	} {
		s, err := readSpec(writeSpec(t, js))
		if err == nil {
			_, err = s.sandboxOf("c1")
		}
		if !errors.Is(err, kind) {
			t.Errorf("%s: got %v, want %v", js, err, kind)
		}
	}
	if _, err := readSpec(t.TempDir()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing config.json: %v", err)
	}
	big := writeSpec(t, `{"process":{"args":["`+strings.Repeat("a", maxSpec)+`"]}}`)
	if _, err := readSpec(big); !errors.Is(err, errdefs.ErrLimit) {
		t.Errorf("oversized config.json: %v", err)
	}
}

func TestCheckBundle(t *testing.T) {
	dir := t.TempDir()
	if err := checkBundle(dir); err != nil {
		t.Error(err)
	}
	for _, b := range []string{"rel", dir + "/../x", dir + "/", filepath.Join(dir, "missing")} {
		if err := checkBundle(b); err == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

func TestParseOptions(t *testing.T) {
	flags, data := parseOptions([]string{"ro", "nosuid", "lowerdir=/a:/b", "upperdir=/u", "rw", "rbind"})
	if flags != unix.MS_NOSUID|unix.MS_BIND|unix.MS_REC || data != "lowerdir=/a:/b,upperdir=/u" {
		t.Errorf("flags %#x data %q", flags, data)
	}
	for _, m := range []rootMount{
		{Type: "ext4", Source: "/dev/vda"},
		{Type: "bind", Source: "rel"},
		{Type: "bind", Source: "/x", Options: []string{"a,b"}},
	} {
		if err := m.check(); err == nil {
			t.Errorf("%+v accepted", m)
		}
	}
}

func TestParseFlags(t *testing.T) {
	f, err := parseFlags([]string{"-namespace", "k8s.io", "-address", "/run/c.sock", "-publish-binary", "/bin/c", "-id", "t1", "start"})
	if err != nil || f.action != "start" || f.namespace != "k8s.io" || f.id != "t1" {
		t.Fatalf("%+v %v", f, err)
	}
	for _, args := range [][]string{
		{"-namespace", "../x", "-id", "t1", "start"},
		{"-namespace", "ns", "-id", "a/b", "start"},
		{"-unknown"},
	} {
		if _, err := parseFlags(args); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v", args, err)
		}
	}
	if f, err := parseFlags([]string{"-v"}); err != nil || f.action != "version" {
		t.Errorf("-v: %+v %v", f, err)
	}
}

func TestSocketPath(t *testing.T) {
	t.Setenv(EnvStateDir, "/run/x")
	a, b := socketPath("/a.sock", "ns", "p1"), socketPath("/a.sock", "ns", "p2")
	if a == b || !strings.HasPrefix(a, "/run/x/") || len(a) > 100 || socketPath("/a.sock", "ns", "p1") != a {
		t.Errorf("%q %q", a, b)
	}
}

func TestRPCError(t *testing.T) {
	for kind, code := range map[error]codes.Code{
		errdefs.ErrNotFound: codes.NotFound, errdefs.ErrInvalidState: codes.FailedPrecondition,
		errdefs.ErrUnsupported: codes.Unimplemented, errors.New("x"): codes.Unknown,
	} {
		if got := status.Code(rpcError(errdefs.Errorf(kind, "m"))); got != code && !(kind.Error() == "x" && got == codes.Unknown) {
			t.Errorf("%v: %v", kind, got)
		}
	}
	if rpcError(nil) != nil {
		t.Error("nil")
	}
}
