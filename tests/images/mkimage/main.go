// Command mkimage builds a single-layer image from a directory and writes it as
// a docker archive (the format of `docker save`), for tests that must not use
// the network:
//
//	go run ./tests/images/mkimage -name alpine:latest -rootfs DIR \
//	  -env PATH=/usr/sbin:/usr/bin:/sbin:/bin -workdir / -cmd /bin/sh -o OUT.tar
//
// The layer keeps modes, symlinks, hard links and device nodes. Every file is
// owned by root unless -chown says otherwise (or -keep-owners keeps the owners
// in the tree, for a rootfs built as root), and every file gets the same mtime
// (-mtime, default 0), so the same tree always gives the same image.
// -entrypoint and -cmd take one argument per use, or a JSON array.
package main

import (
	"archive/tar"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list is a repeatable flag; a single value that is a JSON array sets the whole list.
type list []string

func (l *list) String() string { return strings.Join(*l, " ") }
func (l *list) Set(v string) error {
	if strings.HasPrefix(v, "[") {
		return json.Unmarshal([]byte(v), (*[]string)(l))
	}
	*l = append(*l, v)
	return nil
}

type owner struct{ uid, gid int }

// chowns maps a path in the rootfs ("/home/box") to the owner of it and everything below it.
type chowns map[string]owner

func (c chowns) String() string { return fmt.Sprint(map[string]owner(c)) }
func (c chowns) Set(v string) error {
	p, ids, ok := strings.Cut(v, "=")
	u, g, ok2 := strings.Cut(ids, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || !ok2 || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return fmt.Errorf("want PATH=UID:GID, got %q", v)
	}
	rel := strings.TrimPrefix(filepath.Clean("/"+p), "/")
	if rel == "" {
		rel = "."
	}
	c[rel] = owner{uid, gid}
	return nil
}

// of returns the owner -chown gives rel, and whether one does.
func (c chowns) of(rel string) (owner, bool) {
	for p := rel; ; p = filepath.Dir(p) {
		if o, ok := c[p]; ok {
			return o, true
		}
		if p == "." {
			return owner{}, false
		}
	}
}

func main() {
	var (
		ref, rootfs, out, workdir, user string
		mtime                           int64
		keepOwners                      bool
		env, entrypoint, cmd            list
		owners                          = chowns{}
	)
	flag.StringVar(&ref, "name", "", "image name, e.g. alpine:latest (required)")
	flag.StringVar(&rootfs, "rootfs", "", "directory to pack as the image's only layer (required)")
	flag.StringVar(&out, "o", "", "docker archive to write (required)")
	flag.Var(&env, "env", "KEY=VALUE for the image Env (repeatable)")
	flag.StringVar(&workdir, "workdir", "", "image WorkingDir")
	flag.StringVar(&user, "user", "", "image User")
	flag.Var(&entrypoint, "entrypoint", "one Entrypoint argument per use, or a JSON array")
	flag.Var(&cmd, "cmd", "one Cmd argument per use, or a JSON array")
	flag.Var(owners, "chown", "PATH=UID:GID owner of PATH and everything below it (repeatable; default root)")
	flag.BoolVar(&keepOwners, "keep-owners", false, "keep each file's uid and gid from the tree (-chown still wins)")
	flag.Int64Var(&mtime, "mtime", 0, "mtime of every file and the image creation time, in Unix seconds")
	flag.Parse()
	if ref == "" || rootfs == "" || out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(ref, rootfs, out, mtime, keepOwners, owners, v1.Config{
		Env: env, WorkingDir: workdir, User: user, Entrypoint: entrypoint, Cmd: cmd,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(ref, rootfs, out string, mtime int64, keepOwners bool, owners chowns, cfg v1.Config) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	when := time.Unix(mtime, 0).UTC()

	layerTar, err := os.CreateTemp(filepath.Dir(out), ".mkimage-layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layerTar.Name())
	if err := writeLayer(layerTar, rootfs, when, keepOwners, owners); err != nil {
		layerTar.Close()
		return err
	}
	if err := layerTar.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromFile(layerTar.Name(), tarball.WithCompressedCaching)
	if err != nil {
		return err
	}

	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: when}, CreatedBy: "mkimage"},
	})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: when}
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Config = cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}

	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s id %s, %d bytes\n", out, tag, id, st.Size())
	return nil
}

// writeLayer writes the tree under root as a tar stream in a stable order.
func writeLayer(w io.Writer, root string, mtime time.Time, keepOwners bool, owners chowns) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{} // first path of each multiply-linked file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSocket) != 0 {
			return nil // tar cannot hold sockets
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino}
			if first, ok := seen[key]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				seen[key] = hdr.Name
			}
		}
		o, ok := owners.of(rel)
		if !ok && keepOwners {
			if st, isStat := fi.Sys().(*syscall.Stat_t); isStat {
				o = owner{int(st.Uid), int(st.Gid)}
			}
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = o.uid, o.gid, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
