package k8sshim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/ttrpc"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/boxlite/boxlite/errdefs"
)

// RuntimeType is the runtime type containerd is configured with; it finds
// the binary BinaryName on its PATH from it.
const (
	RuntimeType = "io.containerd.boxlite.v2"
	BinaryName  = "containerd-shim-boxlite-v2"
)

// Environment of the shim (containerd passes its own on).
const (
	// EnvImage names the image boxes boot (default DefaultImage).
	EnvImage     = "BOXLITE_K8S_IMAGE"
	DefaultImage = "alpine:latest"
	// EnvStateDir is where the shims' sockets are (default DefaultStateDir).
	EnvStateDir     = "BOXLITE_K8S_STATE"
	DefaultStateDir = "/run/boxlite-k8s"
)

// flags are containerd's command line for a shim (runtime v2).
type flags struct {
	namespace, address, publishBinary, id, bundle string
	debug                                         bool
	action                                        string
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet(BinaryName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.namespace, "namespace", "", "containerd namespace")
	fs.StringVar(&f.address, "address", "", "containerd's grpc address")
	fs.StringVar(&f.publishBinary, "publish-binary", "", "containerd binary (unused: events go over ttrpc)")
	fs.StringVar(&f.id, "id", "", "task id")
	fs.StringVar(&f.bundle, "bundle", "", "bundle path (delete)")
	fs.BoolVar(&f.debug, "debug", false, "debug logging")
	fs.Bool("v", false, "print the version")
	if err := fs.Parse(args); err != nil {
		return f, errdefs.Errorf(errdefs.ErrInvalidArgument, "%v", err)
	}
	f.action = fs.Arg(0)
	if fs.Lookup("v").Value.String() == "true" {
		f.action = "version"
	}
	if f.action == "version" {
		return f, nil
	}
	if err := checkID("namespace", f.namespace); err != nil {
		return f, err
	}
	if err := checkID("id", f.id); err != nil {
		return f, err
	}
	return f, nil
}

// Main runs the shim binary: `start` (containerd starts a task's shim: it
// prints the socket of the pod's shim daemon, starting one if needed),
// `delete` (cleanup after a shim that died) or, with no action, the daemon
// itself serving the task API on fd 3.
func Main(args []string) int {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("%s[%d] ", BinaryName, os.Getpid()))
	f, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", BinaryName, err)
		return 2
	}
	switch f.action {
	case "version":
		fmt.Printf("%s (runtime %s, task API v2 over ttrpc)\n", BinaryName, RuntimeType)
		return 0
	case "start":
		addr, err := start(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s start: %v\n", BinaryName, err)
			return 1
		}
		fmt.Print(addr)
		return 0
	case "delete":
		out, err := cleanup(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s delete: %v\n", BinaryName, err)
			return 1
		}
		os.Stdout.Write(out)
		return 0
	case "":
		if err := serve(f); err != nil {
			log.Printf("%v", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "%s: unknown action %q\n", BinaryName, f.action)
	return 2
}

// socketPath is the unix socket of the shim daemon serving group (a pod
// sandbox's id) for one containerd (address) and namespace.
func socketPath(address, namespace, group string) string {
	dir := os.Getenv(EnvStateDir)
	if dir == "" {
		dir = DefaultStateDir
	}
	sum := sha256.Sum256([]byte(address + "\x00" + namespace + "\x00" + group))
	return filepath.Join(dir, hex.EncodeToString(sum[:12])+".sock")
}

// dialTimeout bounds probing a pod's existing shim.
const dialTimeout = 2 * time.Second

// start returns the address of the shim daemon of the task's pod, starting
// it when there is none (containerd runs `start` in the bundle).
func start(f flags) (string, error) {
	bundle, err := os.Getwd()
	if err != nil {
		return "", err
	}
	sp, err := readSpec(bundle)
	if err != nil {
		return "", err
	}
	group, err := sp.sandboxOf(f.id)
	if err != nil {
		return "", err
	}
	sock := socketPath(f.address, f.namespace, group)
	addr := "unix://" + sock
	if c, err := net.DialTimeout("unix", sock, dialTimeout); err == nil {
		c.Close()
		return addr, writeAddress(bundle, addr)
	}
	if group != f.id {
		return "", errdefs.Errorf(errdefs.ErrNotFound, "container %s: the shim of its pod %s is not running", f.id, group)
	}
	if err := os.MkdirAll(filepath.Dir(sock), 0o711); err != nil {
		return "", err
	}
	_ = os.Remove(sock) // a dead daemon's
	l, err := net.Listen("unix", sock)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", sock, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // the daemon's socket from now on
	defer ul.Close()
	lf, err := ul.File()
	if err != nil {
		return "", err
	}
	defer lf.Close()
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	args := []string{"-namespace", f.namespace, "-address", f.address, "-id", f.id}
	if f.debug {
		args = append(args, "-debug")
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = bundle
	cmd.ExtraFiles = []*os.File{lf}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives containerd
	if logf := openLog(bundle); logf != nil {
		cmd.Stderr = logf
		defer logf.Close()
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go cmd.Wait() //nolint:errcheck // reaped if it dies before we exit; otherwise init's
	return addr, writeAddress(bundle, addr)
}

// openLog opens the bundle's log FIFO, which containerd reads the shim's
// log from, without blocking (nil when there is none or nobody reads it).
func openLog(bundle string) *os.File {
	fd, err := unix.Open(filepath.Join(bundle, "log"), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	// Blocking from here: the daemon's stderr; containerd drains it.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "log")
}

// writeAddress records the shim's address in the bundle, where containerd
// finds it again after a restart.
func writeAddress(bundle, addr string) error {
	tmp := filepath.Join(bundle, ".address")
	if err := os.WriteFile(tmp, []byte(addr), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(bundle, "address"))
}

// cleanup is `delete`: containerd's cleanup of a task whose shim died. The
// box died with its shim (it is not detached); what is left on the host is
// the rootfs mount.
func cleanup(f flags) ([]byte, error) {
	bundle := f.bundle
	if bundle == "" {
		var err error
		if bundle, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if err := checkBundle(bundle); err != nil {
		return nil, err
	}
	if err := unmountAll(filepath.Join(bundle, "rootfs")); err != nil {
		return nil, err
	}
	if err := removeShare(filepath.Join(bundle, shareName)); err != nil {
		return nil, err
	}
	return proto.Marshal(&taskapi.DeleteResponse{ExitedAt: timestamppb.Now(), ExitStatus: 128 + uint32(unix.SIGKILL)})
}

// serve is the daemon: the task API on the listener containerd's `start`
// passed as fd 3, until Shutdown or SIGTERM.
func serve(f flags) error {
	confine()
	l, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return fmt.Errorf("listener on fd 3: %w", err)
	}
	image := os.Getenv(EnvImage)
	if image == "" {
		image = DefaultImage
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := NewService(Options{Namespace: f.namespace, TTRPCAddress: os.Getenv("TTRPC_ADDRESS"), Image: image, Exit: cancel})
	srv, err := ttrpc.NewServer()
	if err != nil {
		return err
	}
	taskapi.RegisterTTRPCTaskService(srv, svc)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		l.Close()
	}()
	log.Printf("serving %s for %s/%s", RuntimeType, f.namespace, f.id)
	err = srv.Serve(ctx, l)
	if ctx.Err() != nil || errors.Is(err, ttrpc.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		svc.Close()
		_ = os.Remove(l.Addr().String())
		return nil
	}
	return err
}

// confine applies what the daemon can to itself: no new privileges across
// exec, no core dumps, not dumpable (no ptrace or /proc/PID/mem by other
// processes of its uid). It keeps root: it mounts container roots and
// starts boxlite-shim, which jails the VMM and the file daemon.
func confine() {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		log.Printf("confine: no_new_privs: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Printf("confine: not dumpable: %v", err)
	}
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
}
