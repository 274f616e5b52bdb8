//go:build linux

package agent

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// identity is what a process runs as.
type identity struct {
	Uid, Gid uint32
	Groups   []uint32 // supplementary
	Home     string   // from /etc/passwd; "/" when unknown
}

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

const (
	maxDBSize = 4 << 20 // /etc/passwd or /etc/group larger than this is refused
	maxGroups = 65536   // NGROUPS_MAX
)

// resolveUser resolves spec ("", name, uid, uid:gid, name:group, ...) in the
// box's /etc/passwd and /etc/group, with the rules of runc and Docker: a
// numeric uid need not exist (gid 0 then); a name must. Without an explicit
// group, the user's primary group comes from passwd and supplementary groups
// from the group lists naming the user; with one, there are none.
func resolveUser(root, spec string) (identity, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" {
		if spec != "" {
			return identity{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "user %q: empty user name", spec)
		}
		userPart = "0"
	}
	if hasGroup && groupPart == "" {
		return identity{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "user %q: empty group name", spec)
	}
	users, err := readPasswd(root)
	if err != nil {
		return identity{}, err
	}
	id := identity{Home: "/"}
	var u *passwdEntry
	if n, ok := parseID(userPart); ok {
		id.Uid = n
		for i := range users {
			if users[i].uid == n {
				u = &users[i]
				break
			}
		}
	} else {
		for i := range users {
			if users[i].name == userPart {
				u = &users[i]
				break
			}
		}
		if u == nil {
			return identity{}, errdefs.Errorf(errdefs.ErrNotFound, "user %q: no such user in the box's /etc/passwd", userPart)
		}
		id.Uid = u.uid
	}
	if u != nil {
		id.Gid = u.gid
		if u.home != "" {
			id.Home = u.home
		}
	}

	// Only read /etc/group when it matters.
	if !hasGroup && u == nil {
		return id, nil
	}
	groups, err := readGroup(root)
	if err != nil {
		return identity{}, err
	}
	if hasGroup {
		if n, ok := parseID(groupPart); ok {
			id.Gid = n
			return id, nil
		}
		for _, g := range groups {
			if g.name == groupPart {
				id.Gid = g.gid
				return id, nil
			}
		}
		return identity{}, errdefs.Errorf(errdefs.ErrNotFound, "group %q: no such group in the box's /etc/group", groupPart)
	}
	for _, g := range groups {
		for _, m := range g.members {
			if m == u.name && len(id.Groups) < maxGroups {
				id.Groups = append(id.Groups, g.gid)
				break
			}
		}
	}
	return id, nil
}

// parseID accepts a decimal id that fits a uid_t and is not (uid_t)-1.
func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

func readDB(root, name string) ([][]string, error) {
	host, err := resolveIn(root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "read %s: %v", name, err)
	}
	var st unix.Stat_t
	if unix.Stat(host, &st) == nil {
		if rows, ok := dbs.get(host, idOf(&st)); ok {
			return rows, nil
		}
	}
	f, err := os.Open(host)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "read %s: %v", name, err)
	}
	defer f.Close()
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "read %s: %v", name, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxDBSize+1))
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "read %s: %v", name, err)
	}
	if len(b) > maxDBSize {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "read %s: larger than %d bytes", name, maxDBSize)
	}
	var rows [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxDBSize)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, strings.Split(line, ":"))
	}
	dbs.put(host, idOf(&st), rows)
	return rows, nil
}

// dbs keeps the rows readDB parsed, by host path, for as long as the file
// stays the same: every exec resolves its user, and reading and parsing
// /etc/passwd and /etc/group took 2 ms of the agent's 15-19 ms per exec
// under TCG. The rows are shared: callers must not change them.
var dbs = &dbCache{m: map[string]dbRows{}}

// dbSettle: a file changed less than this long ago is not cached. File
// times come from the kernel's coarse clock, so two writes of the same
// size within one tick would leave the same identity (git's "racy clean").
var dbSettle = 2 * time.Second

// The cache's bounds: a box has one root (tests use many), and a file is
// kept only up to a size real ones stay far below, so a box that grows its
// /etc/passwd to maxDBSize does not make the agent hold it.
const (
	maxCachedDBs    = 16
	maxCachedDBSize = 256 << 10
)

type dbCache struct {
	mu sync.Mutex
	m  map[string]dbRows
}

type dbRows struct {
	id   fileID
	rows [][]string
}

// fileID is what changes when a file is replaced or written.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

func (c *dbCache) get(host string, id fileID) ([][]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[host]
	return e.rows, ok && e.id == id
}

func (c *dbCache) put(host string, id fileID, rows [][]string) {
	changed := time.Unix(id.ctime.Unix())
	if m := time.Unix(id.mtime.Unix()); m.After(changed) {
		changed = m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(changed) < dbSettle || id.size > maxCachedDBSize {
		delete(c.m, host)
		return
	}
	if len(c.m) >= maxCachedDBs {
		clear(c.m)
	}
	c.m[host] = dbRows{id, rows}
}

func readPasswd(root string) ([]passwdEntry, error) {
	rows, err := readDB(root, "/etc/passwd")
	if err != nil {
		return nil, err
	}
	var out []passwdEntry
	for _, r := range rows {
		if len(r) < 4 {
			continue
		}
		uid, ok1 := parseID(r[2])
		gid, ok2 := parseID(r[3])
		if !ok1 || !ok2 || r[0] == "" {
			continue
		}
		e := passwdEntry{name: r[0], uid: uid, gid: gid}
		if len(r) > 5 {
			e.home = r[5]
		}
		out = append(out, e)
	}
	return out, nil
}

func readGroup(root string) ([]groupEntry, error) {
	rows, err := readDB(root, "/etc/group")
	if err != nil {
		return nil, err
	}
	var out []groupEntry
	for _, r := range rows {
		if len(r) < 3 {
			continue
		}
		gid, ok := parseID(r[2])
		if !ok || r[0] == "" {
			continue
		}
		g := groupEntry{name: r[0], gid: gid}
		if len(r) > 3 && r[3] != "" {
			g.members = strings.Split(r[3], ",")
		}
		out = append(out, g)
	}
	return out, nil
}
