"""Host folders in a box (BoxLite's volumes= tuples): one box, a read-write
and a read-only volume."""

from __future__ import annotations

import os

import pytest

import boxlite
from conftest import need_image


def test_volumes(run, tmp_path):
    need_image("alpine:latest")
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    (ro / "data.txt").write_text("from host\n")

    async def go():
        async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256,
                                     volumes=[(str(rw), "/work"), (str(ro), "/data", "ro")]) as box:
            r = await box.exec("sh", "-c", "cat /data/data.txt && echo out > /work/out.txt")
            assert r.exit_code == 0, r
            assert r.stdout == "from host\n"
            r = await box.exec("sh", "-c", "echo no > /data/data.txt")
            assert r.exit_code != 0 and "Read-only" in r.stderr, r
            info = await box.info()
            vols = info.raw["config"]["volumes"]
            assert [v["guest_path"] for v in vols] == ["/work", "/data"] and vols[1]["read_only"]

    run(go())
    assert (rw / "out.txt").read_text() == "out\n"
    assert (ro / "data.txt").read_text() == "from host\n"
    st = os.stat(rw / "out.txt")
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())


def test_missing_volume_names_path(run, tmp_path):
    need_image("alpine:latest")
    missing = str(tmp_path / "nope")

    async def go():
        async with boxlite.SimpleBox(image="alpine:latest", volumes=[(missing, "/x")]):
            pass

    with pytest.raises(boxlite.NotFoundError, match="nope"):
        run(go())
