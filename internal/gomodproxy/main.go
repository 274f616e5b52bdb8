// Command gomodproxy writes this module, as a commit has it, in the layout
// of a Go module proxy (DIR/github.com/boxlite/boxlite/@v/vX.Y.Z.{info,mod,zip}
// and list), so that a Go user fetches it with the go command:
//
//	GOPROXY=file:///path/to/DIR,https://proxy.golang.org GONOSUMDB=github.com/boxlite/boxlite \
//	  go get github.com/boxlite/boxlite@vX.Y.Z
//
// (GONOSUMDB: the public checksum database does not know a module that is
// not published.) `make dist-native` runs it into dist/goproxy.
//
//	go run ./internal/gomodproxy -o DIR [-rev HEAD]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/boxlite/boxlite"
)

const path = "github.com/boxlite/boxlite"

func main() {
	out := flag.String("o", "dist/goproxy", "the proxy directory to write")
	rev := flag.String("rev", "HEAD", "the commit to take the module from")
	flag.Parse()
	if err := write(*out, *rev); err != nil {
		fmt.Fprintln(os.Stderr, "gomodproxy:", err)
		os.Exit(1)
	}
}

func write(out, rev string) error {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("not in a git checkout: %w", err)
	}
	repo := strings.TrimSpace(string(root))
	when, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%cI", rev).Output()
	if err != nil {
		return fmt.Errorf("git log %s: %w", rev, err)
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		return err
	}
	m := module.Version{Path: path, Version: "v" + boxlite.Version}
	dir := filepath.Join(out, path, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, m.Version)
	z, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	// The commit's files (git archive: a worktree's .git is a file, which
	// modzip.CreateFromVCS does not take), never the checkout's build outputs.
	tree, err := os.MkdirTemp("", "gomodproxy")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, rev, tree)
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w", rev, err)
	}
	if err := modzip.CreateFromDir(z, m, tree); err != nil {
		z.Close()
		return fmt.Errorf("module zip: %w", err)
	}
	if err := z.Close(); err != nil {
		return err
	}
	gomod, err := exec.Command("git", "-C", repo, "show", rev+":go.mod").Output()
	if err != nil {
		return fmt.Errorf("go.mod at %s: %w", rev, err)
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, t.UTC()})
	for name, data := range map[string][]byte{base + ".mod": gomod, base + ".info": info, filepath.Join(dir, "list"): []byte(m.Version + "\n")} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s in %s\n", path, m.Version, out)
	return nil
}
