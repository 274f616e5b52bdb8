package main

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"
)

// Debian's kernel as guest/fetch-kernel.sh fetched it (`make test-go` sets
// BOXLITE_STOCK_KERNEL); the test fails without it rather than pass having
// tested nothing.
func stockKernel(t *testing.T) []byte {
	dir := os.Getenv("BOXLITE_STOCK_KERNEL")
	if dir == "" {
		t.Fatal("BOXLITE_STOCK_KERNEL is not set (the directory guest/fetch-kernel.sh makes)")
	}
	b, err := os.ReadFile(filepath.Join(dir, "vmlinuz"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExtractDebianKernel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "vmlinux")
	in := filepath.Join(os.Getenv("BOXLITE_STOCK_KERNEL"), "vmlinuz")
	stockKernel(t)
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPVH(b); err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var file, mem uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			if p.Filesz > p.Memsz {
				t.Errorf("segment at %#x: file size %d > memory size %d", p.Paddr, p.Filesz, p.Memsz)
			}
			file, mem = file+p.Filesz, mem+p.Memsz
		}
	}
	// Debian's 6.1 cloud kernel: 45 MiB loaded, of which 11 MiB of zeros
	// (.bss, .brk, .init.scratch) the file no longer maps.
	if file == 0 || mem-file < 4<<20 {
		t.Errorf("loads %d bytes from the file of %d in memory: expected the zero tail cut", file, mem)
	}
}

func TestBadImages(t *testing.T) {
	good := stockKernel(t)
	cut := append([]byte(nil), good[:len(good)/2]...) // payload runs past the end
	lz4 := append([]byte(nil), good...)
	off := (int(lz4[0x1f1])+1)*512 + int(uint32(lz4[0x248])|uint32(lz4[0x249])<<8|uint32(lz4[0x24a])<<16|uint32(lz4[0x24b])<<24)
	for i := off + 8; i < off+4096; i++ { // scribble over the first block
		lz4[i] = 0xff
	}
	for name, b := range map[string][]byte{"empty": nil, "not a bzImage": bytes.Repeat([]byte{1}, 4096), "truncated": cut, "corrupt lz4": lz4} {
		if _, err := pvh(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkPVH([]byte("\x7fELF not really")); err == nil {
		t.Error("checkPVH accepted a non-ELF")
	}
}

func TestLZ4Block(t *testing.T) {
	// "abcabcabcabc": 3 literals, then a 9-byte match at offset 3
	// (overlapping itself), then the literal-only last sequence "xyz".
	src := []byte{0x35, 'a', 'b', 'c', 3, 0, 0x30, 'x', 'y', 'z'}
	got, err := lz4Block(nil, src, 1<<10)
	if err != nil || string(got) != "abcabcabcabcxyz" {
		t.Fatalf("lz4Block = %q, %v", got, err)
	}
	if _, err := lz4Block(nil, src, 8); err == nil {
		t.Error("lz4Block wrote past its limit")
	}
	if _, err := lz4Block(nil, []byte{0x05, 'a', 9, 0}, 1<<10); err == nil {
		t.Error("lz4Block accepted an offset before the start")
	}
}
