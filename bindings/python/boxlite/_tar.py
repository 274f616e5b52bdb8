"""A streaming reader of untrusted tar archives (what copy_out receives).

Python's tarfile reads a GNU long name or a pax header whole into memory,
whatever size the archive claims, so a hostile archive could make the host
allocate gigabytes. This reader understands what tar implementations write
(ustar, GNU long names and links, pax extended headers; base-256 numbers)
with caps on every size it holds in memory, and hands file data out in
chunks. It never touches the filesystem: ``_copy`` decides what to create.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterator, Optional

from .errors import InvalidArgumentError

BLOCK = 512
MAX_LONG_NAME = 64 << 10  # a GNU 'L'/'K' record
MAX_PAX = 1 << 20  # one pax extended header

REGULAR = "file"
DIRECTORY = "dir"
SYMLINK = "symlink"
HARDLINK = "hardlink"
SPECIAL = "special"  # character and block devices, FIFOs

_TYPES = {
    b"0": REGULAR, b"\0": REGULAR, b"7": REGULAR,
    b"1": HARDLINK, b"2": SYMLINK, b"5": DIRECTORY,
    b"3": SPECIAL, b"4": SPECIAL, b"6": SPECIAL,
}


class ArchiveError(InvalidArgumentError):
    """The archive is malformed or does something refused."""


@dataclass
class Member:
    name: str  # as in the archive (not yet checked)
    kind: str  # REGULAR, DIRECTORY, SYMLINK, HARDLINK, SPECIAL
    mode: int
    size: int
    mtime: float
    linkname: str


def _decode(b: bytes) -> str:
    # Names are bytes on Linux; surrogateescape gives them back unchanged.
    return b.decode("utf-8", "surrogateescape")


def _cstr(field: bytes) -> bytes:
    i = field.find(b"\0")
    return field if i < 0 else field[:i]


def _number(field: bytes, what: str) -> int:
    if field and field[0] & 0x80:  # GNU base-256
        if field[0] == 0xFF:
            raise ArchiveError(f"copy_out: negative {what} in archive header")
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    s = field.replace(b"\0", b" ").strip()
    if not s:
        return 0
    try:
        return int(s, 8)
    except ValueError:
        raise ArchiveError(f"copy_out: bad {what} {s[:20]!r} in archive header") from None


def _checksum_ok(h: bytes) -> bool:
    try:
        want = int(h[148:156].replace(b"\0", b" ").strip() or b"x", 8)
    except ValueError:
        return False
    body = h[:148] + b" " * 8 + h[156:]
    unsigned = sum(body)
    signed = sum(b - 256 if b > 127 else b for b in body)
    return want in (unsigned, signed)


def _pax(data: bytes) -> Dict[str, bytes]:
    out: Dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        if data[pos] == 0:  # padding some writers leave
            break
        sp = data.find(b" ", pos, pos + 20)
        if sp < 0:
            raise ArchiveError("copy_out: malformed pax header")
        try:
            length = int(data[pos:sp])
        except ValueError:
            raise ArchiveError("copy_out: malformed pax header") from None
        rec = data[sp + 1 : pos + length]
        if length <= sp - pos or pos + length > len(data) or not rec.endswith(b"\n") or b"=" not in rec:
            raise ArchiveError("copy_out: malformed pax header")
        key, _, value = rec[:-1].partition(b"=")
        out[key.decode("ascii", "replace")] = value
        pos += length
    return out


class Reader:
    """Iterates the members of a tar stream read through ``read(n)``.

    After a REGULAR member, ``data()`` yields its bytes (or ``skip()`` drops
    them); the next iteration skips whatever was not read. ``ended`` is True
    once the end-of-archive block was seen."""

    def __init__(self, read: Callable[[int], bytes], chunk: int = 1 << 20):
        self._read = read
        self._chunk = chunk
        self._left = 0  # data bytes of the current member not consumed yet
        self._pad = 0
        self.ended = False
        self.consumed = 0  # bytes read from the stream

    def _exact(self, n: int) -> bytes:
        parts = []
        got = 0
        while got < n:
            b = self._read(min(n - got, self._chunk))
            if not b:
                raise ArchiveError("copy_out: the archive from the box ends in the middle of an entry")
            parts.append(b)
            got += len(b)
        self.consumed += got
        return b"".join(parts)

    def _discard(self, n: int) -> None:
        while n > 0:
            k = min(n, self._chunk)
            self._exact(k)
            n -= k

    def data(self) -> Iterator[bytes]:
        while self._left > 0:
            b = self._exact(min(self._left, self._chunk))
            self._left -= len(b)
            yield b
        if self._pad:
            self._exact(self._pad)
            self._pad = 0

    def skip(self) -> None:
        self._discard(self._left + self._pad)
        self._left = self._pad = 0

    def _record(self, size: int, cap: int, what: str) -> bytes:
        if size > cap:
            raise ArchiveError(f"copy_out: {what} of {size} bytes in archive (at most {cap})")
        data = self._exact(size)
        self._discard(-size % BLOCK)
        return data

    def __iter__(self) -> "Reader":
        return self

    def __next__(self) -> Member:
        self.skip()
        if self.ended:
            raise StopIteration
        long_name: Optional[bytes] = None
        long_link: Optional[bytes] = None
        pax: Dict[str, bytes] = {}
        while True:
            first = self._read(BLOCK)
            self.consumed += len(first)
            if not first:
                if long_name is None and long_link is None and not pax:
                    # no end-of-archive block: accepted (some writers stop short)
                    self.ended = True
                    raise StopIteration
                raise ArchiveError("copy_out: the archive from the box ends after an extended header")
            h = first if len(first) == BLOCK else first + self._exact(BLOCK - len(first))
            if h == bytes(BLOCK):
                self.ended = True
                raise StopIteration
            if not _checksum_ok(h):
                raise ArchiveError("copy_out: bad checksum in archive header (not a tar stream?)")
            tflag = h[156:157]
            size = _number(h[124:136], "size")
            if tflag == b"L":
                long_name = _cstr(self._record(size, MAX_LONG_NAME, "long name"))
                continue
            if tflag == b"K":
                long_link = _cstr(self._record(size, MAX_LONG_NAME, "long link name"))
                continue
            if tflag == b"x":
                pax.update(_pax(self._record(size, MAX_PAX, "pax header")))
                continue
            if tflag == b"g":
                self._record(size, MAX_PAX, "pax global header")  # nothing in it is used
                continue
            kind = _TYPES.get(tflag)
            if kind is None:
                raise ArchiveError(f"copy_out: unsupported entry type {tflag!r} in archive")
            name = _cstr(h[0:100])
            if h[257:263] == b"ustar\0":  # POSIX ustar: a prefix field
                prefix = _cstr(h[345:500])
                if prefix:
                    name = prefix + b"/" + name
            if long_name is not None:
                name = long_name
            if "path" in pax:
                name = pax["path"]
            link = _cstr(h[157:257])
            if long_link is not None:
                link = long_link
            if "linkpath" in pax:
                link = pax["linkpath"]
            if "size" in pax:
                try:
                    size = int(pax["size"])
                except ValueError:
                    raise ArchiveError("copy_out: bad size in pax header") from None
            if size < 0:
                raise ArchiveError("copy_out: negative size in archive")
            mtime: float = _number(h[136:148], "mtime")
            if "mtime" in pax:
                try:
                    mtime = float(pax["mtime"])
                except ValueError:
                    pass
            mode = _number(h[100:108], "mode")
            if kind == REGULAR and tflag in (b"0", b"\0") and name.endswith(b"/"):
                kind = DIRECTORY  # old tars mark directories by the slash alone
            self._left = size
            self._pad = -size % BLOCK
            return Member(name=_decode(name), kind=kind, mode=mode, size=size, mtime=mtime,
                          linkname=_decode(link))
