//go:build linux

package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bpfAsm assembles classic BPF with forward jumps to labels.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []bpfFixup
}

type bpfFixup struct {
	at     int
	jt, jf string // "" is the next instruction
}

func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// jump emits a conditional jump on K to label jt if true, jf if false.
func (a *bpfAsm) jump(op uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = make(map[string]int)
	}
	a.labels[name] = len(a.prog)
}

func (a *bpfAsm) load(off uint32) { a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
func (a *bpfAsm) ret(k uint32)    { a.stmt(unix.BPF_RET|unix.BPF_K, k) }

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	offset := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok {
			return 0, fmt.Errorf("bpf: no label %q", label)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("bpf: jump from %d to %q (%d) out of range", from, label, to)
		}
		return uint8(d), nil
	}
	for _, f := range a.fixups {
		jt, err := offset(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		jf, err := offset(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		a.prog[f.at].Jt, a.prog[f.at].Jf = jt, jf
	}
	if len(a.prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("bpf: %d instructions, limit %d", len(a.prog), unix.BPF_MAXINSNS)
	}
	return a.prog, nil
}
