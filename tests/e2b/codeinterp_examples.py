# E2B's documented code interpreter examples, unchanged, with E2B's own
# `e2b-code-interpreter` SDK against `boxlite serve` (E2B_API_URL,
# E2B_SANDBOX_URL, E2B_API_KEY from tests/e2b). One sandbox for them all.
# Prints ALL OK.
import base64

from e2b import SandboxException, TimeoutException
from e2b_code_interpreter import Sandbox

from sdkutil import lap


sbx = Sandbox.create()  # the template code-interpreter-v1
print("created", sbx.sandbox_id, lap(), flush=True)

# state across cells, the last expression's value
sbx.run_code("x = 1")
execution = sbx.run_code("x + 1")
assert execution.results[0].text == "2", execution
assert execution.text == "2", execution
assert execution.results[0].is_main_result, execution
assert execution.error is None, execution
print("run_code ok", lap(), flush=True)

# streaming: on_stdout, on_stderr, on_result
out, err, res = [], [], []
execution = sbx.run_code(
    "import sys\nprint('hello world')\nprint('oops', file=sys.stderr)\n'done'",
    on_stdout=lambda data: out.append(data),
    on_stderr=lambda data: err.append(data),
    on_result=lambda result: res.append(result),
)
assert "".join(m.line for m in out) == "hello world\n", out
assert "".join(m.line for m in err) == "oops\n", err
assert not out[0].error and err[0].error, (out, err)
assert [r.text for r in res] == ["done"], res
assert execution.logs.stdout == ["hello world\n"], execution.logs
print("on_stdout ok", lap(), flush=True)

# a matplotlib chart, as E2B's docs draw it
code_to_run = """
import matplotlib.pyplot as plt

plt.plot([1, 2, 3, 4])
plt.ylabel('some numbers')
plt.show()
"""
execution = sbx.run_code(code_to_run)
first_result = execution.results[0]
assert first_result.png, execution
png = base64.b64decode(first_result.png)
assert png.startswith(b"\x89PNG\r\n\x1a\n"), png[:16]
assert "png" in first_result.formats(), first_result.formats()
# and a figure left open, without plt.show()
execution = sbx.run_code("plt.figure(); plt.bar(['a', 'b'], [3, 5])")
assert any(r.png for r in execution.results), execution
print("matplotlib ok", len(png), "bytes", lap(), flush=True)

# rich results: HTML from _repr_html_, display()
execution = sbx.run_code(
    "class Table:\n"
    "    def _repr_html_(self): return '<table><tr><td>1</td></tr></table>'\n"
    "    def __repr__(self): return 'Table()'\n"
    "Table()"
)
assert execution.results[0].html == "<table><tr><td>1</td></tr></table>", execution
assert execution.results[0].text == "Table()", execution
execution = sbx.run_code("from IPython.display import display, Markdown\ndisplay(Markdown('# hi'))\n{'a': 1}")
assert execution.results[0].markdown == "# hi", execution
assert execution.results[-1].is_main_result and execution.results[-1].text == "{'a': 1}", execution
print("rich results ok", lap(), flush=True)

# errors as data
execution = sbx.run_code("1/0")
assert execution.error is not None, execution
assert execution.error.name == "ZeroDivisionError", execution.error
assert execution.error.value == "division by zero", execution.error
assert "ZeroDivisionError" in execution.error.traceback, execution.error.traceback
errors = []
sbx.run_code("raise ValueError('bad')", on_error=lambda e: errors.append(e))
assert [e.name for e in errors] == ["ValueError"], errors
print("errors ok", lap(), flush=True)

# envs for one cell
execution = sbx.run_code("import os; os.environ.get('GREETING')", envs={"GREETING": "hi"})
assert execution.text == "hi", execution
assert sbx.run_code("'GREETING' in os.environ").text == "False"

# a cell past its timeout is interrupted; the context keeps its state
try:
    sbx.run_code("import time\ntime.sleep(60)", timeout=1.5)
    raise AssertionError("the timeout did not raise")
except TimeoutException:
    pass
assert sbx.run_code("x").text == "1"
print("envs + timeout ok", lap(), flush=True)

# JavaScript: the default context, then a context of its own
execution = sbx.run_code("console.log('Hello World'); 40 + 2", language="js")
assert execution.logs.stdout == ["Hello World\n"], execution.logs
assert execution.text == "42", execution
js = sbx.create_code_context(language="js")
assert js.language == "javascript", js
sbx.run_code("let n = 40", context=js)
assert sbx.run_code("n + 2", context=js).text == "42"
print("javascript ok", lap(), flush=True)

# bash
sh = sbx.create_code_context(language="bash")
sbx.run_code("cd /tmp && GREETING=hello", context=sh)
execution = sbx.run_code('echo "$GREETING from $PWD"', context=sh)
assert execution.logs.stdout == ["hello from /tmp\n"], execution.logs
execution = sbx.run_code("echo hi", language="bash")
assert execution.logs.stdout == ["hi\n"], execution.logs
print("bash ok", lap(), flush=True)

# a python context of its own: its cwd, list, restart, remove
context = sbx.create_code_context()
assert context.language == "python" and context.cwd == "/home/user", context
assert sbx.run_code("import os; os.getcwd()", context=context).text == "/home/user"
sbx.run_code("y = 5", context=context)
assert sbx.run_code("y", context=context).text == "5"
tmp = sbx.create_code_context(cwd="/tmp", language="python")
assert sbx.run_code("import os; os.getcwd()", context=tmp).text == "/tmp"
try:
    sbx.create_code_context(cwd="/no/such/dir")
    raise AssertionError("a context in a missing directory started")
except SandboxException as e:
    assert str(e).startswith("500"), e
ids = {c.id for c in sbx.list_code_contexts()}
assert {context.id, js.id, sh.id, tmp.id} <= ids, ids
sbx.restart_code_context(context)
execution = sbx.run_code("y", context=context)
assert execution.error is not None and execution.error.name == "NameError", execution
sbx.restart_code_context(js.id)
assert sbx.run_code("typeof n", context=js).text == "undefined"
sbx.restart_code_context(sh)
assert sbx.run_code('echo "[$GREETING]"', context=sh).logs.stdout == ["[]\n"]
sbx.remove_code_context(tmp)
assert tmp.id not in {c.id for c in sbx.list_code_contexts()}
assert sbx.run_code("x").text == "1", "the default context lost its state"
print("contexts ok", lap(), flush=True)

# the sandbox's other side still works
assert sbx.commands.run("echo hi").stdout == "hi\n"
sbx.files.write("/home/user/data.txt", "1,2,3")
assert sbx.run_code("open('data.txt').read()").text == "1,2,3"

sbx.kill()
assert not sbx.is_running()
print("kill ok", lap(), flush=True)
print("ALL OK")
