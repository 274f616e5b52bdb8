package hv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Defaults and limits of Config.
const (
	DefaultQEMU      = "qemu-system-x86_64"
	DefaultMemoryMiB = 256
	DefaultCPUs      = 1
	MinMemoryMiB     = 32
	MaxCPUs          = 255
	// AgentPortName is the name of the virtio-serial port that carries
	// VM.Channel; the guest finds it at /sys/class/virtio-ports/vportNpM/name
	// and opens /dev/vportNpM (with one port on the only virtio-serial
	// device: /dev/vport0p1).
	AgentPortName = protocol.AgentPort
	// MaxSerialLen is the longest Disk.Serial: virtio-blk carries 20 bytes.
	MaxSerialLen = 20
	// maxCmdline is x86's COMMAND_LINE_SIZE minus the terminating NUL.
	maxCmdline = 2047
	// tbSizeMiB caps QEMU's TCG translation cache, which stays resident:
	// booting fills about 45 MiB of it and an idle box held 58 MiB with a
	// 256 MiB cap. At 32 MiB a boot costs the same QEMU CPU time (within
	// noise: 3.46 vs 3.43 s here); at 16 MiB retranslation cost 0.4-0.7 s.
	// QEMU's own default cap is 1 GiB of host memory per VM.
	tbSizeMiB = 32
	// startTimeout bounds how long QEMU may take to build the machine, from
	// fork to answering its first QMP command. It is normally about 60 ms.
	startTimeout = 30 * time.Second
	// netSocketBuf is each end's socket buffer for the NIC's frames.
	netSocketBuf = 1 << 20
)

// Disk is a raw disk image attached as a virtio-blk device.
type Disk struct {
	Path string
	// Serial identifies the disk in the guest at /sys/block/vdX/serial: at
	// most MaxSerialLen bytes of [A-Za-z0-9._-], unique within a Config, or
	// empty for none. Identify disks by serial, not by vdX name.
	Serial   string
	ReadOnly bool
}

// Config describes one VM. Zero fields take the defaults named on them.
type Config struct {
	// QEMU is the QEMU binary, looked up in PATH; default DefaultQEMU
	// ("qemu-system-x86_64").
	QEMU string
	// Kernel is the guest kernel: a bzImage, or an uncompressed vmlinux ELF
	// with a PVH note. Required.
	Kernel string
	// Initrd is the initramfs; optional.
	Initrd string
	// Cmdline is appended to the default kernel arguments
	// "console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests
	// initcall_blacklist=crypto_kdf108_init" (plus tsc_early_khz=<host kHz>
	// under TCG, unless Cmdline sets it). Later arguments win, so
	// "loglevel=7" here undoes "quiet".
	Cmdline string
	// MemoryMiB is the guest RAM; default DefaultMemoryMiB (256).
	MemoryMiB int
	// CPUs is the number of vCPUs; default DefaultCPUs (1).
	CPUs int
	// Disks are attached in order. With QEMU 7.2 and a guest that loads
	// virtio_blk as a module, the first is vda, the second vdb, and so on;
	// still, identify disks by Serial.
	Disks []Disk
	// Channel gives the guest a virtio-serial port named AgentPortName
	// whose host end is VM.Channel (a socketpair: no path, nothing for
	// another process to connect to). Optional.
	Channel bool
	// ConsoleLog is the file the guest serial console (ttyS0) is appended
	// to, by Start's own goroutine (QEMU gets a socket, never the path),
	// capped at shimapi.ConsoleLogMax and rotated once; its directory must exist.
	// Optional (the console is discarded).
	ConsoleLog string
	// FS are virtio-fs devices (see FS); with any, guest RAM is a shared
	// memfd. Optional.
	FS []FS
	// Accel selects KVM or TCG; default (empty): DetectAccel.
	Accel Accel
	// NIC, when set, gives the guest a virtio-net device whose frames are
	// VM.Network, one Ethernet frame per message of a SOCK_SEQPACKET
	// socketpair (so a frame's size is the message's, never a length the
	// guest sends; unlike SOCK_DGRAM, the queue is bounded by bytes, not by
	// the host's net.unix.max_dgram_qlen, 10 here).
	// Default: no network device at all.
	NIC *NIC
	// ExtraNICs are further virtio-net devices after NIC (which they
	// need), each on a tap (NIC.Tap): a pod's further interfaces
	// (internal/podnet). At most MaxExtraNICs.
	ExtraNICs []NIC
	// Jail, when set, confines QEMU with package jail. Default: none.
	Jail *Jail
	// RAM, when set, is guest memory in the caller's file (see RAM), for
	// saving a VM (Shared) or starting one from a saved state (not Shared).
	// Default: QEMU's own anonymous memory (a memfd with FS).
	RAM *RAM
	// Incoming, when set, is a state VM.Save wrote: the VM starts from it
	// instead of booting, RAM holding the memory saved with it. Start
	// returns once it runs. Default: a boot.
	Incoming *os.File
	// IncomingWithRAM: Incoming is a state SaveWithRAM wrote, which holds
	// the guest's memory itself; RAM is then optional (where QEMU loads
	// it). Default: the memory is RAM's file (Save).
	IncomingWithRAM bool
	// AnonRAMBackend: guest memory is QEMU's own anonymous memory, but as a
	// memory backend object (id "mem"), for a state whose VM had one (a
	// VM restored from a template) loaded with IncomingWithRAM: unlike a
	// memfd, memory the guest never touched stays unallocated (a read of
	// an untouched page maps the zero page; shmem would allocate it).
	// Ignored with RAM or FS. Default: the machine's plain RAM.
	AnonRAMBackend bool
	// CheckIncoming, when set with Incoming, is given the started QEMU's
	// version (VM.Version) before the state is loaded; an error it returns
	// fails Start as it is (the state is not loaded). Default: no check.
	CheckIncoming func(qemuVersion string) error

	ramFD int // RAM.File as QEMU inherits it, set by Start
	// extraNetFDs are ExtraNICs' taps as QEMU inherits them, set by Start.
	extraNetFDs []int
}

// MaxExtraNICs bounds Config.ExtraNICs.
const MaxExtraNICs = 7

// NIC is the guest's network device.
type NIC struct {
	MAC string // e.g. "5a:94:ef:e4:0c:ee"
	// Tap, when set, is a tap device's queue that QEMU reads and writes
	// the NIC's frames on (a pod's network namespace, internal/podnet);
	// otherwise they cross a socket pair whose other end Network returns.
	Tap *os.File
}

// Jail is how a VM's QEMU is confined: its own mount, IPC and network
// namespaces holding only QEMU's own files (under /usr) and, read-only, the
// kernel and initrd; the uid below when the caller is root; a cgroup with
// memory (guest RAM + TCG cache + jailOverheadMiB) and process limits;
// rlimits, no_new_privs and a seccomp filter under QEMU's own -sandbox.
// Everything else QEMU reaches is a descriptor Start hands it.
type Jail struct {
	UID, GID uint32 // the identity QEMU runs as when the caller is root (jail.AllocUID)
	Cgroup   string // the cgroup's name, unique per VM, e.g. "boxlite-<box id>"
	// Helper is a binary whose main calls jail.Main first; default: the
	// running executable.
	Helper string
}

// prepare fills in defaults, validates cfg and finds what Start needs.
func prepare(cfg Config) (_ Config, bin string, tscKHz int, err error) {
	if cfg.QEMU == "" {
		cfg.QEMU = DefaultQEMU
	}
	if bin, err = exec.LookPath(cfg.QEMU); err != nil {
		kind := errdefs.ErrNotFound
		if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			kind = errdefs.ErrInvalidArgument
		}
		return cfg, "", 0, fmt.Errorf("hv: Config.QEMU %q: %v: %w", cfg.QEMU, err, kind)
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = DefaultMemoryMiB
	}
	if cfg.MemoryMiB < MinMemoryMiB {
		return cfg, "", 0, fmt.Errorf("hv: Config.MemoryMiB %d: want at least %d: %w",
			cfg.MemoryMiB, MinMemoryMiB, errdefs.ErrInvalidArgument)
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = DefaultCPUs
	}
	if cfg.NIC != nil {
		if hw, err := net.ParseMAC(cfg.NIC.MAC); err != nil || len(hw) != 6 {
			return cfg, "", 0, fmt.Errorf("hv: Config.NIC.MAC %q is not a MAC address: %w", cfg.NIC.MAC, errdefs.ErrInvalidArgument)
		}
	}
	if len(cfg.ExtraNICs) > 0 && (cfg.NIC == nil || len(cfg.ExtraNICs) > MaxExtraNICs) {
		return cfg, "", 0, fmt.Errorf("hv: %d Config.ExtraNICs: they follow a NIC, at most %d: %w", len(cfg.ExtraNICs), MaxExtraNICs, errdefs.ErrInvalidArgument)
	}
	for _, n := range cfg.ExtraNICs {
		if hw, err := net.ParseMAC(n.MAC); err != nil || len(hw) != 6 || n.Tap == nil {
			return cfg, "", 0, fmt.Errorf("hv: Config.ExtraNICs: MAC %q, tap %v: want a MAC address and a tap: %w", n.MAC, n.Tap != nil, errdefs.ErrInvalidArgument)
		}
	}
	if cfg.CPUs < 1 || cfg.CPUs > MaxCPUs {
		return cfg, "", 0, fmt.Errorf("hv: Config.CPUs %d: want 1 to %d: %w",
			cfg.CPUs, MaxCPUs, errdefs.ErrInvalidArgument)
	}
	if cfg.Accel == "" {
		if cfg.Accel, _, err = DetectAccel(); err != nil {
			return cfg, "", 0, err
		}
	} else if cfg.Accel, err = ParseAccel(string(cfg.Accel)); err != nil {
		return cfg, "", 0, fmt.Errorf("hv: Config.Accel: %w", err)
	}
	if strings.ContainsAny(cfg.Cmdline, "\x00\n") {
		return cfg, "", 0, fmt.Errorf("hv: Config.Cmdline: contains NUL or newline: %w", errdefs.ErrInvalidArgument)
	}

	if cfg.Kernel == "" {
		return cfg, "", 0, fmt.Errorf("hv: Config.Kernel: required: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Kernel, err = regularFile("Config.Kernel", cfg.Kernel); err != nil {
		return cfg, "", 0, err
	}
	if cfg.Initrd != "" {
		if cfg.Initrd, err = regularFile("Config.Initrd", cfg.Initrd); err != nil {
			return cfg, "", 0, err
		}
	}
	disks := make([]Disk, len(cfg.Disks))
	serials := map[string]int{}
	for i, d := range cfg.Disks {
		field := fmt.Sprintf("Config.Disks[%d]", i)
		if d.Path == "" {
			return cfg, "", 0, fmt.Errorf("hv: %s.Path: required: %w", field, errdefs.ErrInvalidArgument)
		}
		if d.Path, err = regularFile(field+".Path", d.Path); err != nil {
			return cfg, "", 0, err
		}
		if d.Serial != "" {
			if len(d.Serial) > MaxSerialLen || !serialRE.MatchString(d.Serial) {
				return cfg, "", 0, fmt.Errorf("hv: %s.Serial %q: want 1 to %d bytes of [A-Za-z0-9._-]: %w",
					field, d.Serial, MaxSerialLen, errdefs.ErrInvalidArgument)
			}
			if j, dup := serials[d.Serial]; dup {
				return cfg, "", 0, fmt.Errorf("hv: %s.Serial %q: already used by Config.Disks[%d]: %w",
					field, d.Serial, j, errdefs.ErrInvalidArgument)
			}
			serials[d.Serial] = i
		}
		disks[i] = d
	}
	cfg.Disks = disks
	if err := checkFS(cfg.FS); err != nil {
		return cfg, "", 0, err
	}
	if err := checkRAM(cfg); err != nil {
		return cfg, "", 0, err
	}
	if cfg.ConsoleLog != "" {
		if cfg.ConsoleLog, err = filepath.Abs(cfg.ConsoleLog); err != nil {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		if fi, err := os.Stat(cfg.ConsoleLog); err == nil && fi.IsDir() {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog %q: is a directory: %w", cfg.ConsoleLog, errdefs.ErrInvalidArgument)
		}
		if fi, err := os.Stat(filepath.Dir(cfg.ConsoleLog)); err != nil {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog %q: directory: %w", cfg.ConsoleLog, statKind(err))
		} else if !fi.IsDir() {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog %q: parent is not a directory: %w", cfg.ConsoleLog, errdefs.ErrInvalidArgument)
		}
	}
	if cfg.Accel == TCG && !strings.Contains(" "+cfg.Cmdline, " tsc_early_khz=") {
		if tscKHz, err = HostTSCkHz(); err != nil {
			return cfg, "", 0, fmt.Errorf("hv: tcg needs tsc_early_khz: %w", err)
		}
	}
	if n := len(kernelCmdline(cfg, tscKHz)); n > maxCmdline {
		return cfg, "", 0, fmt.Errorf("hv: Config.Cmdline: kernel command line is %d bytes, limit %d: %w",
			n, maxCmdline, errdefs.ErrInvalidArgument)
	}
	return cfg, bin, tscKHz, nil
}

// regularFile makes path absolute and checks that it is an existing regular file.
func regularFile(field, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("hv: %s %q: %v: %w", field, path, err, errdefs.ErrInvalidArgument)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("hv: %s %q: %w", field, path, statKind(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("hv: %s %q: not a regular file: %w", field, path, errdefs.ErrInvalidArgument)
	}
	return abs, nil
}

func statKind(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return errdefs.ErrNotFound
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
}
