"""copy_in / copy_out over exec: tar in the box, Python's tarfile on the host.

The C ABI has no file API yet, so files travel as a tar stream through a
process's stdin (copy_in) or stdout (copy_out). Semantics follow ``docker cp``:
copying to an existing directory puts the source inside it under its own name;
otherwise the destination path is the copy's new name. With
``include_parent=False`` a directory's contents go into the destination
directory instead.

The archive from the box is untrusted: members must stay under the copied
name, links may not be written through, and devices, owners and set-id bits
are dropped.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import tarfile
import tempfile
from typing import TYPE_CHECKING, List, Optional

from ._aio import blocking
from .errors import AlreadyExistsError, BoxliteError, ExecError, InvalidArgumentError, NotFoundError

if TYPE_CHECKING:
    from .box import Box

CHUNK = 1 << 20
SPOOL_MEMORY = 32 << 20
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


async def _collect(stream, sink: Optional[list] = None) -> bytes:
    parts = [] if sink is None else sink
    async for chunk in stream.iter_bytes():
        parts.append(chunk)
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


async def copy_out(box: "Box", box_path: str, host_path, *, overwrite: bool = True,
                   follow_symlinks: bool = False, include_parent: bool = True) -> None:
    if not isinstance(box_path, str):
        raise TypeError(f"container_src must be str, not {type(box_path).__name__}")
    dest = os.fspath(host_path)
    if not isinstance(dest, str):
        raise TypeError(f"host_dest must be str or os.PathLike, not {type(host_path).__name__}")
    norm = posixpath.normpath(box_path)
    if norm in ("/", ".", "") or posixpath.basename(norm) in ("..", "."):
        raise InvalidArgumentError(f"copy_out: cannot copy {box_path!r} by name; name a file or directory")
    parent, base = posixpath.split(norm)
    parent = parent or "."
    mode = "auto" if include_parent else "contents"
    ex = await box.exec("sh", "-c", OUT_SCRIPT, "boxlite-copy-out", parent, base, mode,
                        "-h" if follow_symlinks else "", stdin=False)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
    try:
        try:

            async def fill() -> None:
                async for chunk in ex.stdout().iter_bytes():
                    spool.write(chunk)

            _, err = await asyncio.gather(fill(), _collect(ex.stderr()))
            st = await ex.wait()
        finally:
            ex.close()
        msg = err.decode("utf-8", "replace")
        if st.exit_code == EXIT_MISSING:
            raise NotFoundError(msg.strip() or f"copy_out: {box_path}: no such file or directory")
        if st.exit_code != 0:
            raise ExecError(f"copy_out {box_path} -> {dest}", st.exit_code, msg)
        spool.seek(0)
        await blocking(_extract, spool, base, dest, overwrite, not include_parent)
    finally:
        spool.close()


def _safe_members(tar: tarfile.TarFile, base: Optional[str]) -> List[tarfile.TarInfo]:
    """Checks and rewrites the members of an untrusted archive."""
    links = set()
    files = set()
    out = []
    uid, gid = os.getuid(), os.getgid()
    for m in tar.getmembers():
        name = m.name
        while name.startswith("./"):
            name = name[2:]
        name = name.rstrip("/")
        if name in ("", "."):
            continue  # the "." entry of a contents copy
        parts = name.split("/")
        if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise InvalidArgumentError(f"copy_out: unsafe path in archive: {m.name!r}")
        if base is not None and parts[0] != base:
            raise InvalidArgumentError(f"copy_out: unexpected path in archive: {m.name!r}")
        if name in links or any("/".join(parts[:i]) in links for i in range(1, len(parts))):
            raise InvalidArgumentError(f"copy_out: archive writes through a symlink: {m.name!r}")
        if m.issym():
            links.add(name)
        elif m.islnk():
            target = m.linkname
            while target.startswith("./"):
                target = target[2:]
            if target not in files:
                raise InvalidArgumentError(f"copy_out: hard link to outside the copy: {m.name!r} -> {m.linkname!r}")
            m.linkname = target
            files.add(name)
        elif m.isfile():
            files.add(name)
        elif not m.isdir():
            continue  # devices, fifos: not copied
        m.name = name
        m.mode &= 0o777
        m.uid, m.gid, m.uname, m.gname = uid, gid, "", ""
        out.append(m)
    return out


def _extract_all(tar: tarfile.TarFile, members: List[tarfile.TarInfo], into: str) -> None:
    kwargs = {"numeric_owner": True}
    if hasattr(tarfile, "tar_filter"):
        kwargs["filter"] = "tar"  # refuses paths that resolve outside `into`
    for m in members:
        tar.extract(m, into, set_attrs=not m.issym(), **kwargs)


def _extract(spool, base: str, dest: str, overwrite: bool, contents: bool) -> None:
    with tarfile.open(fileobj=spool, mode="r:") as tar:
        if contents:
            members = _safe_members(tar, None)
            os.makedirs(dest, exist_ok=True)
            _extract_all(tar, members, dest)
            return
        members = _safe_members(tar, base)
        final = os.path.join(dest, base) if os.path.isdir(dest) else dest
        if os.path.lexists(final) and not overwrite:
            raise AlreadyExistsError(f"copy_out: {final} already exists")
        parent = os.path.dirname(os.path.abspath(final))
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".boxlite-copy.", dir=parent)
        try:
            _extract_all(tar, members, tmp)
            got = os.path.join(tmp, base)
            if not os.path.lexists(got):
                raise NotFoundError(f"copy_out: the box sent no {base!r}")
            if os.path.isdir(final) and not os.path.islink(final) and os.path.isdir(got) and not os.path.islink(got):
                shutil.copytree(got, final, symlinks=True, dirs_exist_ok=True)
            else:
                if os.path.isdir(final) and not os.path.islink(final):
                    shutil.rmtree(final)
                os.replace(got, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
