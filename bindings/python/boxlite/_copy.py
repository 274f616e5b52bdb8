"""copy_in / copy_out over exec: tar in the box; tarfile (copy_in) and a
hardened streaming extractor (copy_out) on the host.

The C ABI has no file API yet, so files travel as a tar stream through a
process's stdin (copy_in) or stdout (copy_out). Semantics follow ``docker cp``:
copying to an existing directory puts the source inside it under its own name;
otherwise the destination path is the copy's new name. With
``include_parent=False`` a directory's contents go into the destination
directory instead.

The archive from the box is hostile: its stream, names, link targets, modes
and sizes. copy_out extracts it as it arrives (never held whole in memory or
on disk) walking the destination with directory file descriptors: every path
component is opened with O_NOFOLLOW|O_DIRECTORY, entries are created relative
to their parent's fd and never through a symlink or other non-directory,
whether it was in the destination before or came in the same archive. Names
must be relative, without ``..``, and under the copied name; hard links are
only accepted to a file of the same archive and are materialized as a copy;
device nodes and FIFOs are not created; owners and set-id/sticky bits are
dropped. Total bytes and entries are capped (LimitError).

Where a copy lands: a copy to a path that does not exist yet (or over a
non-directory) is extracted into a temporary directory beside it and renamed
into place once complete, so an error leaves nothing behind. A copy merged
into an existing directory writes in place; if it stops (limit, refused
entry, tar failing in the box) what was written so far stays, and the error
says so (``e.partial``, ``e.entries_written``, ``e.bytes_written``,
``e.path``).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import os
import posixpath
import stat
import tarfile
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from . import _tar
from ._aio import blocking, executor
from .errors import AlreadyExistsError, BoxliteError, ExecError, InvalidArgumentError, LimitError, NotFoundError

if TYPE_CHECKING:
    from .box import Box

CHUNK = 1 << 20
SPOOL_MEMORY = 32 << 20
COPY_OUT_MAX_BYTES = 1 << 30  # default cap on the file data one copy_out writes
COPY_OUT_MAX_ENTRIES = 100_000  # default cap on its entries
PIPE_HIGH_WATER = 4 << 20  # archive bytes buffered between the box and the extractor
TRAILING_MAX = 1 << 20  # bytes accepted after the end-of-archive block
STDERR_KEEP = 64 << 10
EXIT_MISSING = 44
EXIT_EXISTS = 45

# $1 mode (auto|into)  $2 destination  $3 top-level name in the archive  $4 overwrite (1|0)
IN_SCRIPT = r"""set -e
mode=$1 dest=$2 name=$3 overwrite=$4
if [ "$mode" = into ]; then
  mkdir -p "$dest"
  exec tar -x -f - -C "$dest"
fi
case "$dest" in */) mkdir -p "$dest";; esac
if [ -d "$dest" ]; then
  if [ "$overwrite" = 0 ] && { [ -e "$dest/$name" ] || [ -L "$dest/$name" ]; }; then
    echo "copy_in: $dest/$name already exists" >&2; exit 45
  fi
  exec tar -x -f - -C "$dest"
fi
if [ "$overwrite" = 0 ] && { [ -e "$dest" ] || [ -L "$dest" ]; }; then
  echo "copy_in: $dest already exists" >&2; exit 45
fi
case "$dest" in
  */*) parent=${dest%/*}; [ -n "$parent" ] || parent=/;;
  *) parent=.;;
esac
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.boxlite-copy.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -x -f - -C "$tmp"
rm -rf "$dest"
mv "$tmp/$name" "$dest"
"""

# $1 parent directory  $2 name in it  $3 mode (auto|contents)  $4 "-h" to follow symlinks, or ""
OUT_SCRIPT = r"""if ! cd "$1" 2>/dev/null || { [ ! -e "$2" ] && [ ! -L "$2" ]; }; then
  echo "copy_out: $1/$2: no such file or directory" >&2; exit 44
fi
if [ "$3" = contents ]; then
  cd "$2" || exit 44
  exec tar -c $4 -f - .
fi
exec tar -c $4 -f - "./$2"
"""


def _reset_owner(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


def _make_tar(src: str, arcname: str, follow_symlinks: bool, contents: bool):
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
    with tarfile.open(fileobj=spool, mode="w", format=tarfile.GNU_FORMAT, dereference=follow_symlinks) as tar:
        if contents:
            for child in sorted(os.listdir(src)):
                tar.add(os.path.join(src, child), arcname=child, filter=_reset_owner)
        else:
            tar.add(src, arcname=arcname, filter=_reset_owner)
    spool.seek(0)
    return spool


async def _collect(stream, keep: int = STDERR_KEEP) -> bytes:
    """Reads a stream to its end, keeping its first ``keep`` bytes (the box
    decides how much it writes)."""
    parts = []
    kept = 0
    async for chunk in stream.iter_bytes():
        if kept < keep:
            parts.append(chunk[: keep - kept])
            kept += len(parts[-1])
    return b"".join(parts)


async def copy_in(box: "Box", host_path, box_path: str, *, overwrite: bool = True,
                  follow_symlinks: bool = False, include_parent: bool = True) -> None:
    src = os.fspath(host_path)
    if not isinstance(src, str):
        raise TypeError(f"host_path must be str or os.PathLike, not {type(host_path).__name__}")
    if not isinstance(box_path, str):
        raise TypeError(f"container_dest must be str, not {type(box_path).__name__}")
    if not box_path:
        raise InvalidArgumentError("container_dest is empty")
    if not os.path.lexists(src):
        raise FileNotFoundError(f"copy_in: {src}: no such file or directory")
    is_dir = os.path.isdir(src)
    contents = is_dir and not include_parent
    name = os.path.basename(os.path.normpath(src))
    if not contents and name in ("", ".", "..", "/"):
        raise InvalidArgumentError(f"copy_in: cannot copy {src!r} by name (copy a directory's contents with include_parent=False)")
    spool = await blocking(_make_tar, src, name, follow_symlinks, contents)
    try:
        mode = "into" if contents else "auto"
        ex = await box.exec("sh", "-c", IN_SCRIPT, "boxlite-copy-in", mode, box_path, name or ".",
                            "1" if overwrite else "0", stdin=True)
        try:
            stdin = ex.stdin()

            async def feed() -> None:
                try:
                    while True:
                        chunk = await blocking(spool.read, CHUNK)
                        if not chunk:
                            break
                        await stdin.write(chunk)
                    await stdin.close()
                except BoxliteError:
                    pass  # tar exited early: its exit status and stderr say why

            _, _, err = await asyncio.gather(feed(), _collect(ex.stdout()), _collect(ex.stderr()))
            st = await ex.wait()
        finally:
            ex.close()
    finally:
        spool.close()
    if st.exit_code == EXIT_EXISTS:
        raise AlreadyExistsError(err.decode("utf-8", "replace").strip())
    if st.exit_code != 0:
        raise ExecError(f"copy_in {src} -> {box_path}", st.exit_code, err.decode("utf-8", "replace"))




def _check_limit(value: Any, what: str, default: int) -> Optional[int]:
    """A cap: a positive int, or None for none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be int or None, not {type(value).__name__}")
    if value <= 0:
        raise InvalidArgumentError(f"{what} must be > 0 (None for no limit), not {value}")
    return value


async def copy_out(box: "Box", box_path: str, host_path, *, overwrite: bool = True,
                   follow_symlinks: bool = False, include_parent: bool = True,
                   max_bytes: Optional[int] = COPY_OUT_MAX_BYTES,
                   max_entries: Optional[int] = COPY_OUT_MAX_ENTRIES) -> None:
    if not isinstance(box_path, str):
        raise TypeError(f"container_src must be str, not {type(box_path).__name__}")
    dest = os.fspath(host_path)
    if not isinstance(dest, str):
        raise TypeError(f"host_dest must be str or os.PathLike, not {type(host_path).__name__}")
    max_bytes = _check_limit(max_bytes, "max_bytes", COPY_OUT_MAX_BYTES)
    max_entries = _check_limit(max_entries, "max_entries", COPY_OUT_MAX_ENTRIES)
    norm = posixpath.normpath(box_path)
    if norm in ("/", ".", "") or posixpath.basename(norm) in ("..", "."):
        raise InvalidArgumentError(f"copy_out: cannot copy {box_path!r} by name; name a file or directory")
    parent, base = posixpath.split(norm)
    parent = parent or "."
    contents = not include_parent
    # Where it goes is settled (and checked) before the box sends anything.
    target = await blocking(_Target, dest, base, contents, overwrite, on_abandon=lambda t: t.discard())
    loop = asyncio.get_running_loop()
    pipe = _Pipe(loop, PIPE_HIGH_WATER)
    # The extractor reads the archive as it arrives, in one worker thread.
    cf = executor().submit(target.extract, pipe.read, max_bytes, max_entries, pipe.abandon)
    stopped = None  # why we stopped the box's tar, if we did
    try:
        ex = await box.exec("sh", "-c", OUT_SCRIPT, "boxlite-copy-out", parent, base,
                            "contents" if contents else "auto", "-h" if follow_symlinks else "", stdin=False)
        try:

            async def fill() -> None:
                nonlocal stopped
                trailing = 0
                try:
                    async for chunk in ex.stdout().iter_bytes():
                        if await pipe.put(chunk):
                            continue
                        if pipe.failed:
                            stopped = "refused"  # the extractor refused the archive
                            break
                        trailing += len(chunk)  # after the end of the archive
                        if trailing > TRAILING_MAX:
                            stopped = "trailing"
                            break
                finally:
                    pipe.close()
                if stopped:
                    try:
                        await ex.kill()
                    except BoxliteError:
                        pass  # it has exited meanwhile

            _, err = await asyncio.gather(fill(), _collect(ex.stderr()))
            st = await ex.wait()
        finally:
            ex.close()
        staged_error: Optional[BaseException] = None
        try:
            await asyncio.wrap_future(cf)
        except Exception as e:  # noqa: BLE001 - decided on below, with tar's exit status
            staged_error = e
    except BaseException:
        pipe.close()
        # The extractor stops at the closed pipe; whatever it made goes.
        cf.add_done_callback(lambda f: executor().submit(target.discard))
        raise
    msg = err.decode("utf-8", "replace")
    try:
        if st.exit_code == EXIT_MISSING and not stopped:
            raise NotFoundError(msg.strip() or f"copy_out: {box_path}: no such file or directory")
        if staged_error is not None and (stopped or st.exit_code == 0):
            raise staged_error
        if stopped == "trailing":
            e = InvalidArgumentError(f"copy_out: the box sent more than {TRAILING_MAX} bytes after the end of the archive")
            target.annotate(e)
            raise e
        if st.exit_code != 0:
            e = ExecError(f"copy_out {box_path} -> {dest}", st.exit_code, msg)
            target.annotate(e)
            raise e from staged_error
        await blocking(target.install)
    except BaseException:
        await blocking(target.discard)
        raise


class _Pipe:
    """Archive bytes from the event loop to the extractor's thread, at most
    ``high`` bytes buffered: ``put`` waits while the buffer is full, so a box
    cannot make the host hold its archive in memory."""

    def __init__(self, loop: asyncio.AbstractEventLoop, high: int):
        self._loop = loop
        self._high = high
        self._cond = threading.Condition()
        self._chunks: "collections.deque[bytes]" = collections.deque()
        self._size = 0
        self._eof = False
        self._done = False  # the extractor stopped reading
        self.failed = False  # ... because it refused the archive or failed
        self._space = asyncio.Event()
        self._space.set()

    async def put(self, data: bytes) -> bool:
        """Hands data to the extractor; False once it takes no more."""
        with self._cond:
            if self._done:
                return False
            self._chunks.append(data)
            self._size += len(data)
            self._cond.notify()
            full = self._size >= self._high
            if full:
                self._space.clear()
        if full:
            await self._space.wait()
        return not self._done

    def close(self) -> None:
        """No more data (the box's stdout ended, or the copy is abandoned)."""
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _wake_writer(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._space.set)
        except RuntimeError:  # the loop is closed: nobody waits
            pass

    # the extractor's side (a worker thread)

    def read(self, n: int) -> bytes:
        with self._cond:
            while not self._chunks and not self._eof:
                self._cond.wait()
            if not self._chunks:
                return b""
            was_full = self._size >= self._high
            b = self._chunks.popleft()
            if len(b) > n:
                self._chunks.appendleft(b[n:])
                b = b[:n]
            self._size -= len(b)
            if was_full and self._size < self._high:
                self._wake_writer()
            return b

    def abandon(self, failed: bool) -> None:
        with self._cond:
            self._done = True
            self.failed = failed
            self._chunks.clear()
            self._size = 0
        self._wake_writer()


# ---- extraction ----------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _lstat_at(dir_fd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove_at(dir_fd: int, name: str) -> None:
    """Removes name in dir_fd, a directory with all it holds; symlinks are
    removed, never followed."""
    st = _lstat_at(dir_fd, name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        try:
            os.chmod(fd, stat.S_IRWXU)  # a read-only directory can still be emptied
        except OSError:
            pass
        for entry in list(os.scandir(fd)):
            _remove_at(fd, entry.name)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _set_times(mtime: float, fd: Optional[int] = None, name: Optional[str] = None,
               dir_fd: Optional[int] = None) -> None:
    try:
        ns = int(mtime * 1e9)
        if not 0 <= ns < (1 << 62):
            return
        if fd is not None:
            os.utime(fd, ns=(ns, ns))
        else:
            os.utime(name, ns=(ns, ns), dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, OverflowError, ValueError):
        pass  # best effort, as tar does


def _refuse(msg: str) -> _tar.ArchiveError:
    return _tar.ArchiveError(f"copy_out: {msg}")


MAX_NAME = 4096  # bytes in one member name (PATH_MAX)
MAX_DEPTH = 256  # components in one member name: one open fd each while walking
MAX_DIR_NAMES = 64 << 20  # bytes of directory names kept to set their attributes at the end
SKIPPED_KEEP = 100


class _Extractor:
    """Creates the members of an archive under root_fd (a directory the
    caller trusts), never following a symlink below it.

    ``base``: every member must be base or under it (None: any relative
    name; a "." entry is the root itself and skipped). What it keeps per
    entry is bounded: the inode of each file it made (so a hard link can
    be checked to point at one) and the names of the directories whose
    mode and time it sets at the end."""

    def __init__(self, root_fd: int, base: Optional[str], max_bytes: Optional[int], max_entries: Optional[int]):
        self.root_fd = root_fd
        self.base = base
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.entries = 0
        self.bytes = 0
        self.skipped: List[str] = []  # device nodes and FIFOs, not created (the first SKIPPED_KEEP)
        self.skipped_count = 0
        self._chain: List[Tuple[str, int]] = []  # open fds of the last parent path
        self._made = set()  # (st_dev, st_ino) of the regular files made
        self._dirs: List[Tuple[Tuple[str, ...], int, float]] = []  # directory attributes, set at the end
        self._dir_names = 0

    # -- names

    def _parts(self, name: str, what: str) -> Optional[Tuple[str, ...]]:
        n = name
        while n.startswith("./"):
            n = n[2:]
        n = n.rstrip("/")
        if n in ("", "."):
            if self.base is None:
                return None  # the "." of a contents copy
            raise _refuse(f"unexpected {what} {name!r} in archive")
        if "\0" in n:
            raise _refuse(f"{what} with a NUL byte in archive: {name!r}")
        if len(os.fsencode(n)) > MAX_NAME:
            raise _refuse(f"{what} longer than {MAX_NAME} bytes in archive: {name[:80]!r}...")
        if n.startswith("/"):
            raise _refuse(f"absolute {what} in archive: {name!r}")
        parts = tuple(n.split("/"))
        if any(p in ("", ".", "..") for p in parts):
            raise _refuse(f"unsafe {what} in archive: {name!r}")
        if len(parts) > MAX_DEPTH:
            raise _refuse(f"{what} deeper than {MAX_DEPTH} directories in archive: {name[:80]!r}...")
        if any(len(os.fsencode(p)) > 255 for p in parts):
            raise _refuse(f"{what} component longer than 255 bytes in archive: {name[:80]!r}...")
        if self.base is not None and parts[0] != self.base:
            raise _refuse(f"unexpected {what} in archive: {name!r} (not under {self.base!r})")
        return parts

    # -- directories

    def close(self) -> None:
        for _, fd in self._chain:
            os.close(fd)
        self._chain = []

    def _dir(self, parts: Tuple[str, ...], create: bool) -> int:
        """An fd of the directory parts (relative to the root), walked one
        component at a time without following symlinks; missing components
        are created when ``create``. Owned by the chain: do not close."""
        keep = 0
        while keep < len(self._chain) and keep < len(parts) and self._chain[keep][0] == parts[keep]:
            keep += 1
        for _, fd in self._chain[keep:]:
            os.close(fd)
        del self._chain[keep:]
        for i in range(keep, len(parts)):
            cur = self._chain[-1][1] if self._chain else self.root_fd
            comp = parts[i]
            try:
                fd = os.open(comp, _DIR_FLAGS, dir_fd=cur)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(comp, 0o777, dir_fd=cur)  # an implicit parent: umask applies
                fd = os.open(comp, _DIR_FLAGS, dir_fd=cur)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    path = "/".join(parts[: i + 1])
                    raise _refuse(f"archive writes through a symlink or other non-directory: {path!r}") from None
                raise
            self._chain.append((comp, fd))
        return self._chain[-1][1] if self._chain else self.root_fd

    def _clear(self, dir_fd: int, name: str, keep_dir: bool) -> bool:
        """Makes room for a new entry: True if a directory is there and kept."""
        st = _lstat_at(dir_fd, name)
        if st is None:
            return False
        if stat.S_ISDIR(st.st_mode):
            if keep_dir:
                return True
            _remove_at(dir_fd, name)
        else:
            os.unlink(name, dir_fd=dir_fd)
        return False

    # -- the archive

    def _count(self, m: _tar.Member, size: int) -> None:
        if self.max_entries is not None and self.entries + 1 > self.max_entries:
            raise LimitError(f"copy_out: the archive has more than {self.max_entries} entries (max_entries)")
        if self.max_bytes is not None and self.bytes + size > self.max_bytes:
            raise LimitError(f"copy_out: the archive holds more than {self.max_bytes} bytes of file data "
                             f"(max_bytes; {m.name[:200]!r} claims {size})")
        self.entries += 1
        self.bytes += size

    def run(self, reader: _tar.Reader) -> None:
        try:
            for m in reader:
                self._member(reader, m)
        finally:
            try:
                self._finish_dirs()
            finally:
                self.close()

    def _member(self, reader: _tar.Reader, m: _tar.Member) -> None:
        src: Tuple[str, ...] = ()
        if m.kind == _tar.HARDLINK:
            src = self._parts(m.linkname, "hard link target") or ()
            size = self._link_size(src, m)
        else:
            size = m.size
        self._count(m, size)
        parts = self._parts(m.name, "path")
        if parts is None:
            return
        if m.kind == _tar.SPECIAL:
            self.skipped_count += 1
            if len(self.skipped) < SKIPPED_KEEP:
                self.skipped.append(m.name)
            return
        parent = self._dir(parts[:-1], create=True)
        name = parts[-1]
        if m.kind == _tar.DIRECTORY:
            if not self._clear(parent, name, keep_dir=True):
                os.mkdir(name, 0o700, dir_fd=parent)
            self._dir_names += len(name) + sum(len(p) + 1 for p in parts[:-1]) + 64
            if self._dir_names > MAX_DIR_NAMES:
                raise LimitError(f"copy_out: the archive's directory names exceed {MAX_DIR_NAMES} bytes in total")
            self._dirs.append((parts, m.mode & 0o777, m.mtime))
            return
        self._clear(parent, name, keep_dir=False)
        if m.kind == _tar.SYMLINK:
            if "\0" in m.linkname or len(os.fsencode(m.linkname)) > MAX_NAME - 1:
                raise _refuse(f"bad symlink target for {m.name!r}")
            os.symlink(m.linkname, name, dir_fd=parent)
            _set_times(m.mtime, name=name, dir_fd=parent)
            return
        if m.kind == _tar.HARDLINK:
            self._copy_link(src, parts, m)
            return
        fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=parent)
        try:
            for chunk in reader.data():
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            os.chmod(fd, m.mode & 0o777)  # no set-id or sticky bits from the box
            _set_times(m.mtime, fd=fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self._made.add((st.st_dev, st.st_ino))

    def _open_own_file(self, src: Tuple[str, ...], m: _tar.Member) -> int:
        """An fd of a regular file this archive created (a hard link's target)."""
        try:
            if not src:
                raise FileNotFoundError
            d = self._dir(src[:-1], create=False)
            fd = os.open(src[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=d)
        except OSError:
            raise _refuse(f"hard link to a file that is not in the archive: {m.name!r} -> {m.linkname!r}") from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) not in self._made or not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _refuse(f"hard link to a file that is not in the archive: {m.name!r} -> {m.linkname!r}")
        return fd

    def _link_size(self, src: Tuple[str, ...], m: _tar.Member) -> int:
        fd = self._open_own_file(src, m)
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def _copy_link(self, src: Tuple[str, ...], parts: Tuple[str, ...], m: _tar.Member) -> None:
        """A hard link becomes an independent copy: no link is ever made on the host."""
        sfd = self._open_own_file(src, m)
        try:
            parent = self._dir(parts[:-1], create=True)
            fd = os.open(parts[-1], _NEW_FILE_FLAGS, 0o600, dir_fd=parent)
            try:
                while True:
                    b = os.read(sfd, CHUNK)
                    if not b:
                        break
                    view = memoryview(b)
                    while view:
                        view = view[os.write(fd, view):]
                st = os.fstat(sfd)
                os.chmod(fd, stat.S_IMODE(st.st_mode))
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
                mine = os.fstat(fd)
            finally:
                os.close(fd)
        finally:
            os.close(sfd)
        self._made.add((mine.st_dev, mine.st_ino))

    def _finish_dirs(self) -> None:
        """Directory modes and times, deepest first, once their contents are in."""
        for parts, mode, mtime in reversed(self._dirs):
            try:
                fd = self._dir(parts, create=False)
            except (OSError, _tar.ArchiveError):
                continue  # replaced by a later entry
            try:
                os.chmod(fd, mode)
            except OSError:
                pass
            _set_times(mtime, fd=fd)
        self._dirs = []


class _Target:
    """Where one copy_out lands, settled before the archive arrives.

    ``extract`` (a worker thread) writes the archive either into a fresh
    temporary directory beside the destination (a new path, or one that is
    not a directory) or, merging, into the existing directory itself;
    ``install`` then renames the temporary copy into place, ``discard``
    removes it."""

    def __init__(self, dest: str, base: str, contents: bool, overwrite: bool):
        self.dest = dest
        self.base = base
        self.contents = contents
        self.extractor: Optional[_Extractor] = None
        self.tmp: Optional[str] = None
        self.merge = False
        self.installed = False
        # The destination path is the caller's: symlinks in it are followed.
        # Below it, nothing is.
        if contents:
            if os.path.isdir(dest):
                self.merge, self.root, self.final = True, dest, dest
            elif os.path.lexists(dest):
                raise FileExistsError(f"copy_out: {dest} exists and is not a directory")
            else:
                self.final = dest
        elif os.path.isdir(dest):
            self.final = os.path.join(dest, base)
            pfd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                st = _lstat_at(pfd, base)
            finally:
                os.close(pfd)
            if st is not None and not overwrite:
                raise AlreadyExistsError(f"copy_out: {self.final} already exists")
            if st is not None and stat.S_ISDIR(st.st_mode):
                self.merge, self.root = True, dest  # members are base/...
        else:
            if os.path.lexists(dest) and not overwrite:
                raise AlreadyExistsError(f"copy_out: {dest} already exists")
            self.final = dest
        if not self.merge:
            parent = os.path.dirname(os.path.abspath(self.final))
            os.makedirs(parent, exist_ok=True)
            self.parent = parent
            self.tmp = tempfile.mkdtemp(prefix=".boxlite-copy.", dir=parent)
            if contents:
                os.mkdir(os.path.join(self.tmp, "d"), 0o777)  # umask applies, as for mkdir
                self.root = os.path.join(self.tmp, "d")
            else:
                self.root = self.tmp

    def extract(self, read: Callable[[int], bytes], max_bytes: Optional[int], max_entries: Optional[int],
                done: Callable[[bool], None]) -> "_Target":
        ok = False
        try:
            root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                self.extractor = _Extractor(root_fd, None if self.contents else self.base, max_bytes, max_entries)
                reader = _tar.Reader(read)
                self.extractor.run(reader)
            finally:
                os.close(root_fd)
            if not self.contents and self.tmp is not None and not os.path.lexists(os.path.join(self.tmp, self.base)):
                raise NotFoundError(f"copy_out: the box sent no {self.base!r}")
            ok = True
            return self
        except BaseException as e:
            if isinstance(e, BoxliteError):
                self.annotate(e)
            raise
        finally:
            done(not ok)

    def annotate(self, e: BaseException) -> None:
        """Says on the error what was left behind."""
        x = self.extractor
        e.path = self.final
        e.partial = bool(self.merge and x is not None and x.entries)
        e.entries_written = x.entries if (x is not None and self.merge) else 0
        e.bytes_written = x.bytes if (x is not None and self.merge) else 0
        if isinstance(e, BoxliteError) and self.merge and x is not None and x.entries and "left in place" not in e.message:
            e.message += (f" ({x.entries} entries, {x.bytes} bytes were merged into {self.final} before "
                          "the copy stopped; they are left in place)")
            e.args = (e.message,) + e.args[1:]
        elif isinstance(e, BoxliteError) and not self.merge and "nothing was written" not in e.message:
            e.message += f" (nothing was written to {self.final})"
            e.args = (e.message,) + e.args[1:]

    def install(self) -> None:
        if self.merge or self.installed:
            return
        assert self.tmp is not None
        tfd = os.open(self.tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        pfd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            src = "d" if self.contents else self.base
            name = os.path.basename(os.path.abspath(self.final))
            got = _lstat_at(tfd, src)
            if got is None:
                raise NotFoundError(f"copy_out: the box sent no {self.base!r}")
            have = _lstat_at(pfd, name)
            if have is not None and (stat.S_ISDIR(have.st_mode) or stat.S_ISDIR(got.st_mode)):
                # rename(2) replaces only a non-directory with a non-directory
                _remove_at(pfd, name)
            os.rename(src, name, src_dir_fd=tfd, dst_dir_fd=pfd)
            self.installed = True
        finally:
            os.close(tfd)
            os.close(pfd)
        self.discard()

    def discard(self) -> None:
        tmp, self.tmp = self.tmp, None
        if tmp is None:
            return
        pfd = os.open(os.path.dirname(tmp), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            _remove_at(pfd, os.path.basename(tmp))
        except OSError:
            pass
        finally:
            os.close(pfd)


def extract(fileobj, dest: str, base: Optional[str] = None, *, overwrite: bool = True,
            max_bytes: Optional[int] = COPY_OUT_MAX_BYTES,
            max_entries: Optional[int] = COPY_OUT_MAX_ENTRIES) -> "_Target":
    """Extracts a tar stream (a file object) as copy_out would: with ``base``,
    the copy of a box path named base (into dest if it is a directory, else
    as dest); without, a directory's contents (include_parent=False)."""
    target = _Target(dest, base or "", base is None, overwrite)
    try:
        target.extract(fileobj.read, max_bytes, max_entries, lambda failed: None)
        target.install()
    except BaseException:
        target.discard()
        raise
    return target
