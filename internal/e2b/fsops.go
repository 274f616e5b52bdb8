package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/boxlite/boxlite"
	pb "github.com/boxlite/boxlite/internal/e2b/envd/filesystem"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The filesystem service runs small POSIX shell commands in the box (stat,
// find, mkdir, mv, rm, readlink: busybox and coreutils both have them):
// no daemon in the guest. What they print is the box's, hence hostile:
// bounded, and parsed without trust.

// fsScript is the one script every operation runs: sh -c fsScript sh OP FMT ARGS.
const fsScript = `op=$1; f=$2; shift 2
ex() { [ -e "$1" ] || [ -L "$1" ]; }
case "$op" in
stat) ex "$1" || exit 2; exec stat -c "$f" -- "$1" ;;
list) ex "$1" || exit 2; [ -d "$1" ] || exit 20; cd -- "$1" || exit 13; exec find . -mindepth 1 -maxdepth "$2" -exec stat -c "$f" -- {} + ;;
mkdir) ex "$1" && exit 17; mkdir -p -- "$1" && exec stat -c "$f" -- "$1" ;;
move) ex "$1" || exit 2; mkdir -p -- "$(dirname -- "$2")" && mv -f -- "$1" "$2" && exec stat -c "$f" -- "$2" ;;
remove) ex "$1" || exit 2; exec rm -rf -- "$1" ;;
readlink) for p; do printf '%s\n' "$(readlink -f -- "$p")"; done ;;
esac
exit 64`

// Bounds of a filesystem operation.
const (
	fsOutputLimit = 16 << 20
	fsTimeout     = 2 * time.Minute
	maxPath       = 4096
	maxDepth      = 64
)

const sep = "\x1f"

// entry is one stat line.
type entry struct {
	path, kind, perms, owner, group string
	size                            int64
	mode                            uint32
	mtime                           int64
	target                          string
}

// resolve is a request's path as the box sees it: relative to the user's
// home, cleaned. A path with NUL or over the bound is refused.
func resolve(p, user string) (string, error) {
	if p == "" {
		return "", statusErr(http.StatusBadRequest, "path is required")
	}
	if len(p) > maxPath || strings.ContainsRune(p, 0) {
		return "", statusErr(http.StatusBadRequest, "path %q: over %d bytes or holds NUL", truncate(p), maxPath)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	}
	if !strings.HasPrefix(p, "/") {
		home := "/root"
		if user != "" && user != "root" && user != "0" {
			home = "/home/" + user
		}
		p = home + "/" + p
	}
	return path.Clean(p), nil
}

// fsOp runs one operation, returning its stat lines.
func (sb *sandbox) fsOp(ctx context.Context, user, op string, args ...string) ([]entry, error) {
	var m [8]byte
	rand.Read(m[:])
	marker := "\x1e" + hex.EncodeToString(m[:]) + sep
	format := marker + strings.Join([]string{"%F", "%s", "%f", "%A", "%U", "%G", "%Y", "%n"}, sep)
	ctx, cancel := context.WithTimeout(ctx, fsTimeout)
	defer cancel()
	res, err := sb.box.Run(ctx, boxlite.Command{Argv: append([]string{"/bin/sh", "-c", fsScript, "sh", op, format}, args...),
		User: user, Timeout: fsTimeout, OutputLimit: fsOutputLimit})
	if err != nil {
		return nil, err
	}
	if res.StdoutTruncated {
		return nil, statusErr(http.StatusRequestEntityTooLarge, "%s %q: the answer is over %d bytes; list less deep", op, truncate(args[0]), fsOutputLimit)
	}
	switch res.Code {
	case 0:
	case 2:
		return nil, statusErr(http.StatusNotFound, "path %q does not exist", truncate(args[0]))
	case 17:
		return nil, connect.NewError(connect.CodeAlreadyExists, errorf("path %q already exists", truncate(args[0])))
	case 20:
		return nil, statusErr(http.StatusBadRequest, "path %q is not a directory", truncate(args[0]))
	default:
		msg := strings.TrimSpace(string(res.Stderr))
		if len(msg) > 512 {
			msg = msg[:512]
		}
		if strings.Contains(msg, "ermission denied") {
			return nil, connect.NewError(connect.CodePermissionDenied, errorf("%s %q: %s", op, truncate(args[0]), msg))
		}
		return nil, connect.NewError(connect.CodeFailedPrecondition, errorf("%s %q failed (exit %d): %s", op, truncate(args[0]), res.Code, msg))
	}
	if op == "readlink" {
		var out []entry
		for _, l := range strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n") {
			out = append(out, entry{target: l})
		}
		return out, nil
	}
	return parseEntries(string(res.Stdout), marker), nil
}

// parseEntries reads stat lines; a name holding a newline continues on the
// next line (no line of a name starts with the random marker).
func parseEntries(out, marker string) []entry {
	var es []entry
	for _, rec := range strings.Split(out, "\n"+marker) {
		rec = strings.TrimPrefix(strings.TrimSuffix(rec, "\n"), marker)
		fs := strings.SplitN(rec, sep, 8)
		if len(fs) != 8 {
			continue
		}
		e := entry{kind: fs[0], perms: fs[3], owner: fs[4], group: fs[5], path: fs[7]}
		e.size, _ = strconv.ParseInt(fs[1], 10, 64)
		raw, _ := strconv.ParseUint(fs[2], 16, 32)
		e.mode = uint32(raw) & 0o7777
		e.mtime, _ = strconv.ParseInt(fs[6], 10, 64)
		es = append(es, e)
	}
	return es
}

// entries completes entries: full paths under dir (list), symlink targets.
func (sb *sandbox) entries(ctx context.Context, user, dir string, es []entry) ([]*pb.EntryInfo, error) {
	var links []string
	var at []int
	for i := range es {
		if dir != "" {
			es[i].path = path.Join(dir, strings.TrimPrefix(es[i].path, "./"))
		}
		if es[i].kind == "symbolic link" {
			links, at = append(links, es[i].path), append(at, i)
		}
	}
	if len(links) > 0 {
		ts, err := sb.fsOp(ctx, user, "readlink", links...)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			if j < len(ts) {
				es[i].target = ts[j].target
			}
		}
	}
	out := make([]*pb.EntryInfo, 0, len(es))
	for _, e := range es {
		out = append(out, e.info())
	}
	return out, nil
}

func (e entry) info() *pb.EntryInfo {
	in := &pb.EntryInfo{Name: path.Base(e.path), Path: e.path, Size: e.size, Mode: e.mode & 0o777, Permissions: e.perms,
		Owner: e.owner, Group: e.group, ModifiedTime: timestamppb.New(time.Unix(e.mtime, 0))}
	switch {
	case e.kind == "directory":
		in.Type = pb.FileType_FILE_TYPE_DIRECTORY
	case e.kind == "symbolic link":
		in.Type, in.IsSymlink = pb.FileType_FILE_TYPE_SYMLINK, true
		t := e.target
		in.SymlinkTarget = &t
	case strings.Contains(e.kind, "regular"):
		in.Type = pb.FileType_FILE_TYPE_FILE
	default:
		in.Type = pb.FileType_FILE_TYPE_UNSPECIFIED
	}
	return in
}
