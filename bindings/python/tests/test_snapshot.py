"""box.snapshot (create, list, get, restore, remove), as BoxLite's SDK
spells it, against a real box: a file written before a snapshot is back
after a restore. Three boots of one box."""

from __future__ import annotations

import uuid

import pytest

import boxlite
from boxlite import Boxlite, BoxOptions
from conftest import need_image


def test_snapshot_create_list_restore(run, tmp_path):
    need_image("alpine:latest")
    rt = Boxlite.default()
    box = run(rt.create(BoxOptions(image="alpine:latest", memory_mib=256, auto_remove=False), name=f"pysnap-{uuid.uuid4().hex[:8]}"))
    try:
        run(box.run("sh", "-c", "echo one > /root/f.txt; sync"))
        live = run(box.snapshot.create("live"))  # a running box, at one instant
        assert not live.memory and live.container_disk_bytes > 0 and box.info().status == "running", live
        run(box.snapshot.remove("live"))
        run(box.stop())

        info = run(box.snapshot.create("one"))
        assert isinstance(info, boxlite.SnapshotInfo)
        assert info.name == "one" and info.box_id == box.id and info.container_disk_bytes > 0
        assert 0 < info.size_bytes < info.container_disk_bytes  # sparse
        with pytest.raises(boxlite.AlreadyExistsError):
            run(box.snapshot.create("one"))
        with pytest.raises(boxlite.InvalidArgumentError, match="snapshot name"):
            run(box.snapshot.create("../x"))
        assert [s.name for s in run(box.snapshot.list())] == ["one"]
        assert run(box.snapshot.get("one")) == info
        assert run(box.snapshot.get("nope")) is None

        run(box.start())
        run(box.run("sh", "-c", "echo two > /root/f.txt"))
        run(box.stop())
        run(box.snapshot.restore("one"))
        run(box.start())
        assert run(box.run("cat", "/root/f.txt")).stdout == "one\n"
        with pytest.raises(boxlite.InvalidStateError):
            run(box.snapshot.restore("one"))  # running

        run(box.stop())
        # An import keeps the archive's content; the importer's options decide the rest.
        archive = run(box.export(dest=str(tmp_path)))
        imp = run(rt.import_box(archive, f"pyimp-{uuid.uuid4().hex[:8]}",
                                options=BoxOptions(memory_mib=256, auto_remove=False)))
        try:
            got = imp.info()
            assert got.memory_mib == 256 and got.auto_remove is False, got.raw
        finally:
            run(imp.remove(force=True))
            imp.close()
        with pytest.raises(boxlite.InvalidArgumentError, match="image"):
            run(rt.import_box(archive, options=BoxOptions(image="alpine:latest")))
        run(box.snapshot.remove("one"))
        assert run(box.snapshot.list()) == []
        with pytest.raises(boxlite.NotFoundError):
            run(box.snapshot.remove("one"))
    finally:
        run(box.remove(force=True))
        box.close()
