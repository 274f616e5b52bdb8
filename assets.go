package boxlite

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
)

// assets are the files a box needs besides its image: the shim binary, the
// network stack's and the guest kernel and initramfs (and virtiofsd, for
// volumes). They sit together, as `make build` lays them out:
// DIR/boxlite-shim, DIR/boxlite-net, DIR/virtiofsd, DIR/guest/vmlinuz,
// DIR/guest/initramfs.cpio.
type assets struct {
	dir      string
	searched []string
}

// A runtime looks for its assets, when neither WithAssets nor
// $BOXLITE_ASSETS says where, beside the program, then in lib/boxlite
// beside the program's bin/ (PREFIX/bin/PROGRAM with PREFIX/lib/boxlite,
// the layout `cmake --install` and `make install` make), then in
// installDirs (`make install`'s default prefix is /usr/local).
var installDirs = []string{"/usr/local/lib/boxlite", "/usr/lib/boxlite"}

func findAssets(dir string) assets {
	var candidates []string
	if dir != "" {
		candidates = []string{dir}
	} else {
		if d := os.Getenv("BOXLITE_ASSETS"); d != "" {
			candidates = append(candidates, d)
		}
		if exe, err := os.Executable(); err == nil {
			d := filepath.Dir(exe)
			candidates = append(candidates, d, filepath.Join(filepath.Dir(d), "lib", "boxlite"))
		}
		candidates = append(candidates, installDirs...)
	}
	for _, c := range candidates {
		if a := (assets{dir: c}); a.missing() == "" {
			return a
		}
	}
	a := assets{searched: candidates}
	if len(candidates) > 0 {
		a.dir = candidates[0]
	}
	return a
}

func (a assets) shim() string     { return filepath.Join(a.dir, "boxlite-shim") }
func (a assets) netstack() string { return filepath.Join(a.dir, "boxlite-net") }
func (a assets) kernel() string   { return filepath.Join(a.dir, "guest", "vmlinuz") }
func (a assets) initrd() string   { return filepath.Join(a.dir, "guest", "initramfs.cpio") }
func (a assets) missing() string {
	for _, p := range []string{a.shim(), a.netstack(), a.kernel(), a.initrd()} {
		if _, err := os.Stat(p); err != nil {
			return p
		}
	}
	return ""
}

func (a assets) check() error {
	if m := a.missing(); m != "" {
		where := a.dir
		if len(a.searched) > 0 {
			where = strings.Join(a.searched, ", ")
		}
		return errdefs.Errorf(errdefs.ErrNotFound, "boxlite assets (%s) not in %s; install them (`make build install`: /usr/local/lib/boxlite), put them beside the program, or set BOXLITE_ASSETS", filepath.Base(m), where)
	}
	return nil
}
