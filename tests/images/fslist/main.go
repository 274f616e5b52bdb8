// Command fslist prints one line per file of a tree, with everything a
// container image layer can say about it, so that two trees can be compared
// with diff: a box's root file system and a reference unpacked on the host.
//
//	fslist DIR
//
// Each line is the path relative to DIR ("." for DIR), then space-separated
// fields: type (one of d f l c b p s), mode=<perm, setuid/setgid/sticky in
// octal>, own=uid:gid, mtime=<seconds.nanoseconds>, and where they apply
// nlink= (not for directories), size= (files and symlinks), sha256= (first
// 16 hex digits of a file's content), target= (symlink), dev=major:minor,
// link=<first path of a hard-linked group> (files sharing an inode, by
// device and inode number), and xattr:NAME=<Go-quoted value> (trusted.overlay.*
// left out: overlayfs keeps those for itself). Lines are sorted by path; names
// with unprintable bytes are Go-quoted. Built static (CGO_ENABLED=0), it runs
// in any box.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fslist DIR")
		os.Exit(2)
	}
	lines, err := list(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fslist:", err)
		os.Exit(1)
	}
	fmt.Print(strings.Join(lines, ""))
}

func list(root string) ([]string, error) {
	type inode struct{ dev, ino uint64 }
	type entry struct {
		rel string
		st  unix.Stat_t
	}
	var entries []entry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", path, err)
		}
		entries = append(entries, entry{rel, st})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].rel < entries[j].rel })

	first := map[inode]string{}
	var lines []string
	for _, e := range entries {
		path, st := filepath.Join(root, e.rel), e.st
		var b strings.Builder
		b.WriteString(quote(e.rel))
		typ := st.Mode & unix.S_IFMT
		fmt.Fprintf(&b, " %c mode=%04o own=%d:%d mtime=%d.%09d", typeChar(typ), st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Sec, st.Mtim.Nsec)
		if typ != unix.S_IFDIR {
			fmt.Fprintf(&b, " nlink=%d", st.Nlink)
		}
		switch typ {
		case unix.S_IFREG:
			sum, err := hashFile(path)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, " size=%d sha256=%s", st.Size, sum)
		case unix.S_IFLNK:
			target, err := os.Readlink(path)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, " size=%d target=%s", st.Size, quote(target))
		case unix.S_IFCHR, unix.S_IFBLK:
			fmt.Fprintf(&b, " dev=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		if typ != unix.S_IFDIR && st.Nlink > 1 {
			key := inode{st.Dev, st.Ino}
			if p, ok := first[key]; ok {
				fmt.Fprintf(&b, " link=%s", quote(p))
			} else {
				first[key] = e.rel
			}
		}
		xattrs, err := readXattrs(path)
		if err != nil {
			return nil, err
		}
		for _, x := range xattrs {
			b.WriteString(" xattr:" + x)
		}
		b.WriteByte('\n')
		lines = append(lines, b.String())
	}
	return lines, nil
}

func typeChar(typ uint32) byte {
	switch typ {
	case unix.S_IFDIR:
		return 'd'
	case unix.S_IFREG:
		return 'f'
	case unix.S_IFLNK:
		return 'l'
	case unix.S_IFCHR:
		return 'c'
	case unix.S_IFBLK:
		return 'b'
	case unix.S_IFIFO:
		return 'p'
	case unix.S_IFSOCK:
		return 's'
	}
	return '?'
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// readXattrs returns NAME=VALUE for each extended attribute of path, sorted.
func readXattrs(path string) ([]string, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(path, buf)
	if err == unix.ENOTSUP {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listxattr %s: %w", path, err)
	}
	var out []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" || strings.HasPrefix(name, "trusted.overlay.") {
			continue
		}
		val := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(path, name, val)
		if err != nil {
			return nil, fmt.Errorf("getxattr %s %s: %w", path, name, err)
		}
		out = append(out, quote(name)+"="+strconv.Quote(string(val[:m])))
	}
	sort.Strings(out)
	return out, nil
}

// quote leaves a name that is printable and has no spaces as it is.
func quote(s string) string {
	q := strconv.Quote(s)
	if q[1:len(q)-1] == s && !strings.ContainsAny(s, " =") {
		return s
	}
	return q
}
