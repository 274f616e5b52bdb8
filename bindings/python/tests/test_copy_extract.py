"""copy_out's extractor against hostile archives, fed directly (no box).

Every test owns a tmp dir with a "host" part (files that must never change)
and a destination; after each hostile archive the host files' hashes are
compared with what they were."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile

import pytest

import boxlite
from boxlite import _copy, _tar


def _tar_bytes(entries, fmt=tarfile.GNU_FORMAT) -> bytes:
    """entries: (TarInfo kwargs, data or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for kw, data in entries:
            ti = tarfile.TarInfo(kw.pop("name"))
            for k, v in kw.items():
                setattr(ti, k, v)
            if data is not None:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def D(name, mode=0o755):
    return ({"name": name, "type": tarfile.DIRTYPE, "mode": mode}, None)


def F(name, data=b"x", mode=0o644):
    return ({"name": name, "mode": mode}, data)


def L(name, target):
    return ({"name": name, "type": tarfile.SYMTYPE, "linkname": target}, None)


def H(name, target):
    return ({"name": name, "type": tarfile.LNKTYPE, "linkname": target}, None)


@pytest.fixture
def host(tmp_path):
    """A host file and directory outside every destination, and their hashes."""
    h = tmp_path / "host"
    (h / "dir").mkdir(parents=True)
    (h / "file").write_bytes(b"host secret\n")
    (h / "dir" / "inner").write_bytes(b"inner\n")
    before = _snapshot(h)
    yield h
    assert _snapshot(h) == before, "a host file outside the destination changed"


def _snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            digest = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), digest)
    return out


def _extract(data, dest, base="evil", **kw):
    return _copy.extract(io.BytesIO(data), str(dest), base, **kw)


# ---- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../evil", "evil/../../escape", "/abs", "/evil/x", "evil/./x", "evil//x", "other/x"])
def test_refuses_names_outside_the_copy(tmp_path, host, name):
    data = _tar_bytes([D("evil"), F(name, b"pwned")])
    dest = tmp_path / "dest"
    with pytest.raises(boxlite.InvalidArgumentError) as ei:
        _extract(data, dest)
    assert "nothing was written" in str(ei.value)
    assert not dest.exists()  # a new path: nothing is left
    assert not (tmp_path / "escape").exists() and not (tmp_path / "evil").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".boxlite-copy")]


def test_contents_copy_refuses_absolute_and_dotdot(tmp_path, host):
    for name in ("../x", "/abs"):
        dest = tmp_path / "contents"
        with pytest.raises(boxlite.InvalidArgumentError):
            _copy.extract(io.BytesIO(_tar_bytes([D("."), F(name)])), str(dest))
        assert not dest.exists()


# ---- links --------------------------------------------------------------------------------


def test_refuses_hard_link_outside(tmp_path, host):
    for target in ("/etc/passwd", str(host / "file"), "evil/not-in-archive", "../host/file"):
        data = _tar_bytes([D("evil"), H("evil/passwd", target)])
        with pytest.raises(boxlite.InvalidArgumentError, match="hard link|unsafe|absolute"):
            _extract(data, tmp_path / "dest")
        assert not (tmp_path / "dest").exists()


def test_hard_link_inside_becomes_a_copy(tmp_path, host):
    data = _tar_bytes([D("evil"), F("evil/a", b"shared", 0o640), H("evil/b", "evil/a")])
    _extract(data, tmp_path / "dest")
    a, b = tmp_path / "dest" / "a", tmp_path / "dest" / "b"
    assert a.read_bytes() == b.read_bytes() == b"shared"
    assert os.stat(a).st_ino != os.stat(b).st_ino and os.stat(a).st_nlink == 1
    assert stat.S_IMODE(os.stat(b).st_mode) == 0o640


def test_symlink_then_file_through_it(tmp_path, host):
    data = _tar_bytes([D("evil"), L("evil/escape", str(host / "dir")), F("evil/escape/pwned", b"pwned"),
                       L("evil/f", str(host / "file")), F("evil/f", b"overwrite?")])
    with pytest.raises(boxlite.InvalidArgumentError, match="symlink"):
        _extract(data, tmp_path / "dest")
    assert not (host / "dir" / "pwned").exists()


def test_symlink_then_file_with_the_same_name_replaces_the_link(tmp_path, host):
    data = _tar_bytes([D("evil"), L("evil/f", str(host / "file")), F("evil/f", b"mine")])
    _extract(data, tmp_path / "dest")
    f = tmp_path / "dest" / "f"
    assert not f.is_symlink() and f.read_bytes() == b"mine"


def test_symlink_to_a_symlink_chain_and_relative_escapes(tmp_path, host):
    data = _tar_bytes([D("evil"), L("evil/up", "../../host"), L("evil/up2", "up/dir"),
                       F("evil/up2/inner", b"pwned")])
    with pytest.raises(boxlite.InvalidArgumentError, match="symlink"):
        _extract(data, tmp_path / "dest")


def test_symlinks_arrive_as_symlinks(tmp_path, host):
    data = _tar_bytes([D("evil"), L("evil/abs", str(host / "file")), L("evil/rel", "../../host/dir")])
    _extract(data, tmp_path / "dest")
    assert os.readlink(tmp_path / "dest" / "abs") == str(host / "file")
    assert os.readlink(tmp_path / "dest" / "rel") == "../../host/dir"


# ---- merging into what is there -------------------------------------------------------------


def test_merge_replaces_planted_symlinks_never_follows_them(tmp_path, host):
    out = tmp_path / "out"
    (out / "evil").mkdir(parents=True)
    os.symlink(host / "file", out / "evil" / "x")
    os.symlink(host / "dir", out / "evil" / "d")
    os.symlink(host / "dir", out / "evil" / "e")
    data = _tar_bytes([D("evil"), F("evil/x", b"box bytes"), D("evil/d"), F("evil/d/inner", b"box bytes"),
                       L("evil/e", "/somewhere")])
    _extract(data, out)  # out is a directory: lands as out/evil, merged
    assert not (out / "evil" / "x").is_symlink() and (out / "evil" / "x").read_bytes() == b"box bytes"
    assert not (out / "evil" / "d").is_symlink() and (out / "evil" / "d" / "inner").read_bytes() == b"box bytes"
    assert os.readlink(out / "evil" / "e") == "/somewhere"


def test_merge_refuses_a_planted_symlink_as_an_implicit_parent(tmp_path, host):
    out = tmp_path / "out"
    (out / "evil").mkdir(parents=True)
    (out / "evil" / "keep").write_text("kept")
    os.symlink(host / "dir", out / "evil" / "d")
    data = _tar_bytes([F("evil/d/inner", b"pwned")])  # no directory entry for evil/d
    with pytest.raises(boxlite.InvalidArgumentError, match="symlink") as ei:
        _extract(data, out)
    assert (out / "evil" / "keep").read_text() == "kept"
    assert os.path.islink(out / "evil" / "d")


def test_merge_when_the_copy_itself_is_a_planted_symlink(tmp_path, host):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(host / "dir", out / "evil")  # a first copy_out brought evil -> host dir
    data = _tar_bytes([D("evil"), F("evil/inner", b"pwned"), F("evil/new", b"pwned")])
    _extract(data, out)
    assert not (out / "evil").is_symlink() and (out / "evil" / "inner").read_bytes() == b"pwned"


def test_contents_copy_into_a_symlinked_tree(tmp_path, host):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(host / "dir", out / "sub")
    data = _tar_bytes([D("."), D("./sub"), F("./sub/inner", b"pwned"), L("./l", str(host / "file")),
                       F("./l", b"pwned")])
    _copy.extract(io.BytesIO(data), str(out))
    assert (out / "sub" / "inner").read_bytes() == b"pwned" and not (out / "sub").is_symlink()


def test_overwrite_false(tmp_path):
    out = tmp_path / "out"
    (out / "evil").mkdir(parents=True)
    with pytest.raises(boxlite.AlreadyExistsError):
        _extract(_tar_bytes([D("evil")]), out, overwrite=False)


# ---- what is not created --------------------------------------------------------------------


def test_devices_fifos_and_set_id_bits(tmp_path, host):
    data = _tar_bytes([D("evil", 0o1777), ({"name": "evil/null", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, None),
                       ({"name": "evil/sda", "type": tarfile.BLKTYPE, "devmajor": 8, "devminor": 0}, None),
                       ({"name": "evil/fifo", "type": tarfile.FIFOTYPE}, None),
                       F("evil/suid", b"#!/bin/sh\n", 0o6755)])
    t = _extract(data, tmp_path / "dest")
    dest = tmp_path / "dest"
    assert sorted(os.listdir(dest)) == ["suid"]
    assert stat.S_IMODE(os.stat(dest / "suid").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o777
    assert sorted(t.extractor.skipped) == ["evil/fifo", "evil/null", "evil/sda"]


def test_unknown_entry_types_and_corruption(tmp_path):
    data = bytearray(_tar_bytes([D("evil"), F("evil/a", b"abc")]))
    bad = bytes(data)
    data[512 + 156] = ord("S")  # GNU sparse: refused (checksum fixed below)
    h = data[512:1024]
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    data[512:1024] = h
    with pytest.raises(boxlite.InvalidArgumentError, match="unsupported entry type"):
        _extract(bytes(data), tmp_path / "d1")
    corrupt = bytearray(bad)
    corrupt[512 + 10] ^= 0xFF
    with pytest.raises(boxlite.InvalidArgumentError, match="checksum"):
        _extract(bytes(corrupt), tmp_path / "d2")
    with pytest.raises(boxlite.InvalidArgumentError, match="ends in the middle"):
        _extract(bad[: 1024 + 100], tmp_path / "d3")
    assert not any((tmp_path / d).exists() for d in ("d1", "d2", "d3"))


# ---- limits -------------------------------------------------------------------------------------


def _huge_header(name: str, size: int) -> bytes:
    ti = tarfile.TarInfo(name)
    ti.size = size
    return ti.tobuf(format=tarfile.GNU_FORMAT)


def test_huge_entry_over_the_cap_is_refused_before_its_data(tmp_path):
    class Stream:
        """The header of a 100 GiB file, then data the extractor must not read."""

        def __init__(self):
            d = tarfile.TarInfo("evil")
            d.type = tarfile.DIRTYPE
            self.buf = d.tobuf(format=tarfile.GNU_FORMAT) + _huge_header("evil/huge", 100 << 30)
            self.served = 0

        def read(self, n):
            if self.buf:
                b, self.buf = self.buf[:n], self.buf[n:]
            else:
                b = bytes(min(n, 1 << 20))
            self.served += len(b)
            return b

    s = Stream()
    with pytest.raises(boxlite.LimitError, match="max_bytes") as ei:
        _copy.extract(s, str(tmp_path / "dest"), "evil")
    assert s.served < 64 << 10
    assert ei.value.code == "limit" and ei.value.partial is False
    assert not (tmp_path / "dest").exists()


def test_byte_and_entry_caps(tmp_path):
    data = _tar_bytes([D("evil")] + [F(f"evil/f{i}", b"12345678") for i in range(20)])
    with pytest.raises(boxlite.LimitError, match="max_entries"):
        _extract(data, tmp_path / "a", max_entries=10)
    with pytest.raises(boxlite.LimitError, match="max_bytes"):
        _extract(data, tmp_path / "b", max_bytes=100)
    _extract(data, tmp_path / "c", max_entries=None, max_bytes=None)
    assert len(os.listdir(tmp_path / "c")) == 20
    # merging: what was written stays, and the error says so
    out = tmp_path / "out"
    (out / "evil").mkdir(parents=True)
    with pytest.raises(boxlite.LimitError) as ei:
        _extract(data, out, max_bytes=100)
    e = ei.value
    assert e.partial and e.entries_written == 13 and e.bytes_written == 96 and e.path == str(out / "evil")
    assert "left in place" in str(e)
    assert len(os.listdir(out / "evil")) == 12


def test_oversized_metadata_is_refused(tmp_path):
    for tflag, what in ((b"L", "long name"), (b"x", "pax header")):
        ti = tarfile.TarInfo("././@LongLink")
        ti.type = tflag
        ti.size = 50 << 20
        data = ti.tobuf(format=tarfile.USTAR_FORMAT) + bytes(4096)
        with pytest.raises(boxlite.InvalidArgumentError, match=what):
            _extract(data, tmp_path / "dest")


def test_reads_in_bounded_chunks():
    class Lazy:
        """A 64 MiB file generated as it is read."""

        def __init__(self):
            self.head = _huge_header("evil", 64 << 20)
            self.left = 64 << 20
            self.biggest = 0

        def read(self, n):
            self.biggest = max(self.biggest, n)
            if self.head:
                b, self.head = self.head[:n], self.head[n:]
                return b
            k = min(n, self.left)
            self.left -= k
            return bytes(k) if k else bytes(min(n, 1024))

    s = Lazy()
    r = _tar.Reader(s.read)
    m = next(r)
    assert (m.name, m.size) == ("evil", 64 << 20)
    assert sum(len(c) for c in r.data()) == 64 << 20
    assert s.biggest <= 1 << 20


# ---- formats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_formats_long_names_and_modes(tmp_path, fmt):
    deep = "evil/" + "/".join(["d" * 40] * 3) + "/ünïcode file"
    link_target = "x" * 150 if fmt != tarfile.USTAR_FORMAT else "short"
    entries = [D("evil"), F(deep, b"deep", 0o600), L("evil/link", link_target), F("evil/exe", b"#!", 0o755)]
    if fmt == tarfile.USTAR_FORMAT:
        deep = "evil/" + "/".join(["d" * 40] * 3) + "/unicode"
        entries[1] = F(deep, b"deep", 0o600)
    data = _tar_bytes(entries, fmt)
    _extract(data, tmp_path / "dest")
    dest = tmp_path / "dest"
    assert (dest / deep[len("evil/"):]).read_bytes() == b"deep"
    assert stat.S_IMODE(os.stat(dest / deep[len("evil/"):]).st_mode) == 0o600
    assert os.readlink(dest / "link") == link_target
    assert os.access(dest / "exe", os.X_OK)


def test_a_file_copy_and_a_directory_replacing_a_file(tmp_path):
    _extract(_tar_bytes([F("evil", b"one file")]), tmp_path / "f")
    assert (tmp_path / "f").read_bytes() == b"one file"
    (tmp_path / "g").write_text("old")
    _extract(_tar_bytes([D("evil"), F("evil/a", b"a")]), tmp_path / "g")
    assert (tmp_path / "g" / "a").read_bytes() == b"a"
    _extract(_tar_bytes([F("evil", b"file again")]), tmp_path / "g")  # g is a directory now: lands inside
    assert (tmp_path / "g" / "evil").read_bytes() == b"file again"


def test_names_too_long_or_too_deep(tmp_path):
    deep = "evil/" + "/".join(["d"] * 300) + "/f"
    with pytest.raises(boxlite.InvalidArgumentError, match="deeper than"):
        _extract(_tar_bytes([D("evil"), F(deep)], tarfile.PAX_FORMAT), tmp_path / "a")
    long = "evil/" + "/".join(["n" * 200] * 25)
    with pytest.raises(boxlite.InvalidArgumentError, match="longer than 4096"):
        _extract(_tar_bytes([D("evil"), F(long)], tarfile.PAX_FORMAT), tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
