// Command pvhkernel extracts the uncompressed vmlinux ELF from a bzImage so
// that QEMU boots it directly through its PVH entry point: under TCG the
// decompressor's emulated work (and the compressed copy in guest RAM) is
// saved on every boot. Usage: pvhkernel BZIMAGE OUT.
//
// The kernel's trailing zeros (.bss, .brk and the 4 MiB .init.scratch, which
// the linker places in the file) are cut from each segment's file size:
// QEMU zero-fills the rest of a segment, and keeps the file mapped, so the
// zeros would be host memory of every box.
package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// maxKernel bounds the decompressed kernel: a bad image fails, not the host.
const maxKernel = 512 << 20

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: pvhkernel BZIMAGE OUT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "pvhkernel:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	bz, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	vmlinux, err := pvh(bz)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, vmlinux, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// pvh is the bootable vmlinux of a bzImage, its zero tails cut.
func pvh(bz []byte) ([]byte, error) {
	vmlinux, err := extract(bz)
	if err != nil {
		return nil, err
	}
	if err := checkPVH(vmlinux); err != nil {
		return nil, err
	}
	return vmlinux, trimZeros(vmlinux)
}

// extract returns the decompressed payload of a bzImage (boot protocol
// 2.08+: payload_offset and payload_length in the setup header).
func extract(bz []byte) ([]byte, error) {
	if len(bz) < 0x250 || string(bz[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS setup header)")
	}
	if v := binary.LittleEndian.Uint16(bz[0x206:]); v < 0x208 {
		return nil, fmt.Errorf("boot protocol %#x has no payload fields (want 2.08+)", v)
	}
	setup := int(bz[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off := (setup+1)*512 + int(binary.LittleEndian.Uint32(bz[0x248:]))
	n := int(binary.LittleEndian.Uint32(bz[0x24c:]))
	if off < 0 || n <= 0 || off+n > len(bz) {
		return nil, fmt.Errorf("payload [%d, +%d) outside the %d-byte image", off, n, len(bz))
	}
	p := bz[off : off+n]
	switch {
	case bytes.HasPrefix(p, []byte{0x02, 0x21, 0x4c, 0x18}):
		return unlz4Legacy(p[4:], maxKernel)
	case bytes.HasPrefix(p, []byte{0x1f, 0x8b}):
		r, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, err
		}
		return readMax(r, maxKernel)
	case bytes.HasPrefix(p, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		r, err := zstd.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return readMax(r, maxKernel)
	}
	return nil, fmt.Errorf("payload compression % x not supported (lz4, gzip, zstd)", p[:min(len(p), 6)])
}

func readMax(r io.Reader, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err == nil && len(b) > max {
		err = fmt.Errorf("decompresses to more than %d bytes", max)
	}
	return b, err
}

// unlz4Legacy decodes the LZ4 legacy frame the kernel uses (after its magic):
// blocks of a 32-bit little-endian compressed size and an LZ4 block of at
// most 8 MiB. The kernel appends its decompressed size (4 bytes), which
// ends the stream as a block size larger than what is left.
func unlz4Legacy(src []byte, max int) ([]byte, error) {
	const blockMax = 8 << 20
	var out []byte
	for len(src) >= 4 {
		n := int(binary.LittleEndian.Uint32(src))
		if n == 0x184c2102 { // another frame's magic
			src = src[4:]
			continue
		}
		if n > len(src)-4 {
			break
		}
		var err error
		if out, err = lz4Block(out, src[4:4+n], len(out)+blockMax); err != nil {
			return nil, err
		}
		if len(out) > max {
			return nil, fmt.Errorf("decompresses to more than %d bytes", max)
		}
		src = src[4+n:]
	}
	if len(out) == 0 {
		return nil, errors.New("empty lz4 stream")
	}
	return out, nil
}

var errLZ4 = errors.New("corrupt lz4 block")

// lz4Block appends the decoding of one LZ4 block to dst, which may grow to
// limit bytes; matches may reach back into earlier blocks (legacy frames
// chain them).
func lz4Block(dst, src []byte, limit int) ([]byte, error) {
	length := func(i, n int) (int, int, error) { // extends a 4-bit length of 15
		if n != 15 {
			return i, n, nil
		}
		for {
			if i >= len(src) {
				return 0, 0, errLZ4
			}
			b := src[i]
			i++
			n += int(b)
			if b != 255 {
				return i, n, nil
			}
		}
	}
	for i := 0; i < len(src); {
		token := src[i]
		i++
		var lit int
		var err error
		if i, lit, err = length(i, int(token>>4)); err != nil {
			return nil, err
		}
		if lit > len(src)-i || len(dst)+lit > limit {
			return nil, errLZ4
		}
		dst = append(dst, src[i:i+lit]...)
		i += lit
		if i == len(src) {
			break // the last sequence is literals only
		}
		if i+2 > len(src) {
			return nil, errLZ4
		}
		off := int(src[i]) | int(src[i+1])<<8
		i += 2
		var m int
		if i, m, err = length(i, int(token&15)); err != nil {
			return nil, err
		}
		m += 4
		if off == 0 || off > len(dst) || len(dst)+m > limit {
			return nil, errLZ4
		}
		for k := len(dst) - off; m > 0; m-- { // byte by byte: a match may overlap itself
			dst = append(dst, dst[k])
			k++
		}
	}
	return dst, nil
}

// checkPVH makes sure QEMU can boot the ELF directly: x86-64 with a Xen
// PHYS32_ENTRY note (type 18), which QEMU's PVH loader looks for.
func checkPVH(b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("payload is not an ELF: %w", err)
	}
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("payload ELF is for %v, not x86-64", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			return err
		}
		for len(notes) >= 12 {
			nsz := int(binary.LittleEndian.Uint32(notes))
			dsz := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			align := func(n int) int { return (n + 3) &^ 3 }
			end := 12 + align(nsz) + align(dsz)
			if nsz < 0 || dsz < 0 || end > len(notes) {
				break
			}
			if typ == 18 && string(bytes.TrimRight(notes[12:12+nsz], "\x00")) == "Xen" {
				return nil
			}
			notes = notes[end:]
		}
	}
	return errors.New("vmlinux has no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): QEMU could not boot it directly")
}

// trimZeros lowers each PT_LOAD's p_filesz by its trailing zero bytes (a
// 64-bit little-endian ELF, as checkPVH found).
func trimZeros(b []byte) error {
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(b[0x20:]), int(le.Uint16(b[0x36:])), int(le.Uint16(b[0x38:]))
	if phentsize < 56 || phoff+uint64(phentsize*phnum) > uint64(len(b)) {
		return errors.New("bad program headers")
	}
	for i := range phnum {
		ph := b[int(phoff)+i*phentsize:]
		if le.Uint32(ph) != uint32(elf.PT_LOAD) {
			continue
		}
		off, filesz := le.Uint64(ph[8:]), le.Uint64(ph[32:])
		if off+filesz > uint64(len(b)) {
			return fmt.Errorf("segment %d outside the file", i)
		}
		seg := b[off : off+filesz]
		le.PutUint64(ph[32:], uint64(len(bytes.TrimRight(seg, "\x00"))))
	}
	return nil
}
