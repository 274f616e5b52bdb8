"""Box.copy_in / copy_out with CopyOptions (BoxLite's signatures), backed by
the library's native copy: a tree with an executable and a symlink, a large
file, docker cp's rules, options and their errors; and the box's and the
runtime's metrics, which need a plain Box (an InteractiveBox runs its
commands in one shell session: one exec). One box for the module.
Hostile archives are tested where they are refused, in the Go tests
(filecopy unit tests, tests/integration TestCopyHostileAgent)."""

import hashlib
import os

import pytest

import boxlite
from boxlite import CopyOptions
from conftest import need_image


@pytest.fixture(scope="module")
def box(run):
    need_image("alpine:latest")
    b = run(boxlite.Boxlite.default().create(boxlite.BoxOptions(image="alpine:latest", memory_mib=256)))
    yield b
    run(b.stop())
    b.close()


def test_copy_tree_roundtrip_keeps_modes_and_links(box, run, tmp_path):
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    blob = os.urandom(8 << 20)
    (src / "sub" / "blob").write_bytes(blob)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(src / "run.sh", 0o750)
    os.symlink("sub/blob", src / "link")
    os.utime(src / "sub" / "blob", (1600000000, 1600000000))
    run(box.copy_in(str(src), "/root/py/", CopyOptions()))
    r = run(box.run("sh", "-c", "cd /root/py/tree && ./run.sh && stat -c '%a %u %Y' run.sh sub/blob && readlink link && sha256sum sub/blob"))
    assert r.exit_code == 0, r
    lines = r.stdout.split("\n")
    assert lines[0] == "ran" and lines[1].startswith("750 0 ") and lines[2] == "644 0 1600000000"
    assert lines[3] == "sub/blob" and lines[4].split()[0] == hashlib.sha256(blob).hexdigest()
    out = tmp_path / "back"
    run(box.copy_out("/root/py/tree", out, copy_options=CopyOptions(max_bytes=16 << 20)))
    out = out / "tree"  # BoxLite's layout: the directory inside the destination it made
    assert (out / "sub" / "blob").read_bytes() == blob
    assert os.stat(out / "run.sh").st_mode & 0o7777 == 0o750
    assert os.readlink(out / "link") == "sub/blob"
    assert os.stat(out / "sub" / "blob").st_mtime == 1600000000
    # include_parent=False: the directory's contents, merged into an existing dir
    contents = tmp_path / "contents"
    contents.mkdir()
    run(box.copy_out("/root/py/tree", contents, CopyOptions(include_parent=False)))
    assert sorted(os.listdir(contents)) == ["link", "run.sh", "sub"]


def test_copy_options_and_errors(box, run, tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x")
    run(box.copy_in(f, "/root/py-once"))
    with pytest.raises(boxlite.AlreadyExistsError):
        run(box.copy_in(f, "/root/py-once", CopyOptions(overwrite=False)))
    with pytest.raises(boxlite.InvalidArgumentError, match="not recursive"):
        run(box.copy_in(tmp_path, "/root/py-dir", CopyOptions(recursive=False)))
    with pytest.raises(boxlite.NotFoundError, match="/no/such"):
        run(box.copy_out("/no/such", tmp_path / "x"))
    with pytest.raises(boxlite.LimitError):
        run(box.copy_out("/bin/busybox", tmp_path / "x", CopyOptions(max_entries=None, max_bytes=1024)))
    assert not (tmp_path / "x").exists()
    with pytest.raises(TypeError):
        run(box.copy_in(f, "/root/x", CopyOptions(overwrite="yes")))
    with pytest.raises(TypeError):
        run(box.copy_in(f, "/root/x", CopyOptions(), overwrite=False))
    with pytest.raises(boxlite.InvalidArgumentError):
        run(box.copy_out("/root/py-once", tmp_path / "x", CopyOptions(max_bytes=-3)))
    # A followed symlink resolves in the box: /etc/passwd here is the box's.
    run(box.run("ln", "-sf", "/etc/passwd", "/root/pw"))
    run(box.copy_out("/root/pw", tmp_path / "pw", CopyOptions(follow_symlinks=True)))
    assert (tmp_path / "pw").read_text().startswith("root:")
    run(box.copy_out("/root/pw", tmp_path / "pwlink"))
    assert os.readlink(tmp_path / "pwlink") == "/etc/passwd"


def test_metrics_count_execs(box, run):
    """The box's counters (its shim's) and the runtime's count this test's execs
    exactly; a command that is not found is an exec error, one that exits 3 is not."""
    rt = boxlite.Boxlite.default()
    b0, r0 = run(box.metrics()), run(rt.metrics())
    assert run(box.run("echo", "hello")).exit_code == 0
    assert run(box.run("sh", "-c", "exit 3")).exit_code == 3
    with pytest.raises(boxlite.NotFoundError):
        run(box.run("no-such-command"))
    b1, r1 = run(box.metrics()), run(rt.metrics())
    assert isinstance(b1, boxlite.BoxMetrics) and isinstance(r1, boxlite.RuntimeMetrics)
    assert b1.commands_executed_total - b0.commands_executed_total == 3, (b0, b1)
    assert b1.exec_errors_total - b0.exec_errors_total == 1, (b0, b1)
    assert b1.bytes_received_total - b0.bytes_received_total == len("hello\n"), (b0, b1)
    assert b1.bytes_sent_total == b0.bytes_sent_total
    assert r1.total_commands_executed - r0.total_commands_executed == 3, (r0, r1)
    assert r1.total_exec_errors - r0.total_exec_errors == 1, (r0, r1)
    assert r1.num_running_boxes >= 1 and r1.boxes_created_total >= 1, r1
    assert b1.memory_bytes > 0 and b1.guest_boot_duration_ms > 0 and b1.total_create_duration_ms > 0, b1
    assert isinstance(b1.cpu_percent, float) and b1.cpu_percent >= 0
    # The sync API reads the same.
    assert boxlite.SyncBoxlite(_runtime=rt).metrics().total_commands_executed == r1.total_commands_executed
