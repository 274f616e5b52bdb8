//go:build linux

package seccomp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data.
type seccompData struct {
	nr   uint32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	binary.LittleEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runBPF is a classic BPF interpreter for the instructions a seccomp filter
// may use, written from the kernel's definitions (net/core/filter.c,
// seccomp_check_filter), independent of the assembler under test.
func runBPF(t *testing.T, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	data := d.bytes()
	var a, x uint32
	var mem [16]uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		class := ins.Code & 0x07
		switch class {
		case unix.BPF_LD:
			switch {
			case ins.Code == unix.BPF_LD|unix.BPF_W|unix.BPF_ABS:
				if ins.K%4 != 0 || int(ins.K)+4 > len(data) {
					t.Fatalf("pc %d: bad load offset %d", pc, ins.K)
				}
				a = binary.LittleEndian.Uint32(data[ins.K:])
			case ins.Code == unix.BPF_LD|unix.BPF_IMM:
				a = ins.K
			case ins.Code == unix.BPF_LD|unix.BPF_MEM:
				a = mem[ins.K]
			default:
				t.Fatalf("pc %d: load %#x not allowed in seccomp", pc, ins.Code)
			}
		case unix.BPF_ALU:
			v := ins.K
			if ins.Code&0x08 == unix.BPF_X {
				v = x
			}
			switch ins.Code & 0xf0 {
			case unix.BPF_AND:
				a &= v
			case unix.BPF_OR:
				a |= v
			case unix.BPF_ADD:
				a += v
			case unix.BPF_SUB:
				a -= v
			case unix.BPF_RSH:
				a >>= v
			case unix.BPF_LSH:
				a <<= v
			default:
				t.Fatalf("pc %d: alu %#x", pc, ins.Code)
			}
		case unix.BPF_JMP:
			if ins.Code == unix.BPF_JMP|unix.BPF_JA {
				pc += int(ins.K)
				continue
			}
			v := ins.K
			if ins.Code&0x08 == unix.BPF_X {
				v = x
			}
			var cond bool
			switch ins.Code & 0xf0 {
			case unix.BPF_JEQ:
				cond = a == v
			case unix.BPF_JGT:
				cond = a > v
			case unix.BPF_JGE:
				cond = a >= v
			case unix.BPF_JSET:
				cond = a&v != 0
			default:
				t.Fatalf("pc %d: jump %#x", pc, ins.Code)
			}
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_RET:
			if ins.Code&0x18 == unix.BPF_A {
				return a
			}
			return ins.K
		case unix.BPF_MISC:
			if ins.Code&0xf8 == unix.BPF_TAX {
				x = a
			} else {
				a = x
			}
		case unix.BPF_ST:
			mem[ins.K] = a
		default:
			t.Fatalf("pc %d: instruction %#x", pc, ins.Code)
		}
	}
	t.Fatal("fell off the end of the program")
	return 0
}

func TestBPFAssembler(t *testing.T) {
	var a bpfAsm
	a.load(offNr)
	a.jump(unix.BPF_JEQ, 1, "no", "")
	a.ret(RetAllow)
	a.label("no")
	a.ret(retEPERM)
	prog, err := a.assemble()
	if err != nil {
		t.Fatal(err)
	}
	if prog[1].Jt != 1 || prog[1].Jf != 0 {
		t.Fatalf("jump offsets %d/%d", prog[1].Jt, prog[1].Jf)
	}
	if runBPF(t, prog, seccompData{nr: 1}) != retEPERM || runBPF(t, prog, seccompData{nr: 2}) != RetAllow {
		t.Fatal("assembled program does not run as written")
	}
	var b bpfAsm
	b.jump(unix.BPF_JEQ, 1, "missing", "")
	if _, err := b.assemble(); err == nil {
		t.Error("jump to a missing label assembled")
	}
	var c bpfAsm
	c.label("back")
	c.load(0)
	c.jump(unix.BPF_JEQ, 1, "back", "")
	if _, err := c.assemble(); err == nil {
		t.Error("backward jump assembled")
	}
	var d bpfAsm
	d.jump(unix.BPF_JEQ, 1, "far", "")
	for range 300 {
		d.ret(RetAllow)
	}
	d.label("far")
	d.ret(retEPERM)
	if _, err := d.assemble(); err == nil {
		t.Error("jump beyond 255 instructions assembled")
	}
}

var retEPERM, retENOSYS = RetErrno(unix.EPERM), RetErrno(unix.ENOSYS)
