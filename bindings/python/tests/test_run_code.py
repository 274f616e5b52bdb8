"""python:slim: CodeBox.run_code's rich results in python, javascript and bash
contexts (the image has nodejs and matplotlib: tests/images/python-rootfs.sh)."""

from __future__ import annotations

import base64

import pytest

import boxlite
from conftest import need_image


@pytest.fixture(scope="module")
def cb(run):
    need_image("python:slim")
    box = boxlite.CodeBox(memory_mib=512)
    run(box.__aenter__())
    yield box
    run(box.__aexit__(None, None, None))


def test_python_value_state_and_count(cb, run):
    run(cb.run_code("x = 1"))
    r = run(cb.run_code("x + 1"))
    assert r.text == "2" and r.results[0].text == "2" and r.results[0].is_main_result
    assert r.execution_count == 2 and r.error is None
    assert run(cb.run_code("'quoted'")).text == "quoted"
    # run() keeps its own interpreter: x is not there
    assert "NameError" in run(cb.run("x"))


def test_python_error_logs_and_rich(cb, run):
    r = run(cb.run_code("print('out')\n1/0"))
    assert r.error.name == "ZeroDivisionError" and r.error.value == "division by zero"
    assert "1/0" in r.error.traceback and r.logs.stdout == ["out\n"]
    r = run(cb.run_code("class T:\n    def _repr_html_(self): return '<b>t</b>'\n"
                        "    def _repr_json_(self): return {'k': [1]}\n"
                        "display(T())\nfrom IPython.display import Markdown\nMarkdown('# h')"))
    assert [x.formats() for x in r.results] == [["text", "html", "json"], ["text", "markdown"]]
    assert r.results[0].html == "<b>t</b>" and r.results[0].json == {"k": [1]}
    assert r.results[1].markdown == "# h" and r.results[1].is_main_result


def test_python_matplotlib_png(cb, run):
    r = run(cb.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"))
    pngs = [x.png for x in r.results if x.png]
    assert r.error is None and len(pngs) == 1, r
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG")


def test_javascript_and_bash_keep_state(cb, run):
    run(cb.run_code("let n = 40", language="javascript"))
    r = run(cb.run_code("console.log('js'); n + 2", language="js"))
    assert r.text == "42" and r.logs.stdout == ["js\n"]
    assert run(cb.run_code("null.f", language="javascript")).error.name == "TypeError"
    run(cb.run_code("cd /tmp; V=7", language="bash"))
    r = run(cb.run_code("echo $V $PWD", language="bash"))
    assert r.logs.stdout == ["7 /tmp\n"] and r.error is None
    assert run(cb.run_code("exit 3", language="bash")).error.name == "ExitCode"


def test_context_restart_and_timeout(cb, run):
    ctx = run(cb.create_code_context("python"))
    run(cb.run_code("y = 5", context=ctx))
    assert run(ctx.run_code("y")).text == "5"
    with pytest.raises(boxlite.TimeoutError) as e:
        run(ctx.run_code("import time\ntime.sleep(60)", timeout=2))
    assert e.value.execution.timed_out
    assert run(ctx.run_code("y")).text == "5"
    run(ctx.restart())
    r = run(ctx.run_code("y"))
    assert r.error.name == "NameError" and r.execution_count == 1
    with pytest.raises(ValueError):
        run(cb.run_code("1", language="cobol"))


def test_sync_code_context_by_delegation(cb, run):
    from boxlite.sync_api import SyncCodeContext

    ctx = SyncCodeContext(run(cb.create_code_context("javascript")))
    try:
        ctx.run_code("var z = 2")
        assert ctx.run_code("z * 21").text == "42"
        ctx.restart()
        assert ctx.run_code("typeof z").text == "undefined"
    finally:
        ctx.close()
    assert ctx.closed
