"""Code contexts: a code interpreter's persistent sessions with rich results.

``CodeBox.run_code(code, language=...)`` runs code in the box's default
context of that language (python, javascript, bash) and returns an
``Execution``, as E2B's code interpreter does: ``results`` (the last
expression's value, display() calls and matplotlib figures, each with
``.text``, ``.html``, ``.png``...), ``logs`` (stdout and stderr) and
``error`` (name, value, traceback).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import _ffi as raw
from ._aio import blocking
from ._checks import check_env_dict, check_timeout
from .errors import BoxliteError, ClosedError, TimeoutError
from .session import _session_options

if TYPE_CHECKING:
    from .box import Box

__all__ = ["CodeContext", "CodeExecution", "CodeResult", "Execution", "ExecutionError", "Logs", "Result"]

# MIME type -> Result attribute, as E2B's server names them.
_FIELDS = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
    "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
    "application/json": "json", "application/javascript": "javascript",
}
_FORMATS = ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript")


class Result:
    """A rich result: one representation per format. ``png`` and ``jpeg``
    are base64, ``json`` is the decoded value; formats without a field of
    their own are in ``extra`` by MIME type. ``is_main_result``: the value
    of the cell's last expression (others come from display() calls and
    figures). ``text`` of a string value has its quotes taken off, as E2B's."""

    def __init__(self, data: Dict[str, str], is_main_result: bool = False):
        self.is_main_result = is_main_result
        self.raw: Dict[str, str] = dict(data)
        self.extra: Dict[str, str] = {}
        for name in _FORMATS:
            setattr(self, name, None)
        for mime, value in data.items():
            name = _FIELDS.get(mime)
            if name is None:
                self.extra[mime] = value
            elif name == "json":
                try:
                    self.json = json.loads(value)
                except ValueError:
                    self.extra[mime] = value
            else:
                setattr(self, name, value)
        t = self.text
        if t is not None and len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
            self.text = t[1:-1]

    text: Optional[str]
    html: Optional[str]
    markdown: Optional[str]
    svg: Optional[str]
    png: Optional[str]
    jpeg: Optional[str]
    pdf: Optional[str]
    latex: Optional[str]
    json: Any
    javascript: Optional[str]

    def formats(self) -> List[str]:
        """The formats the result has ("text", "html", "png"...), then its extra MIME types."""
        return [f for f in _FORMATS if getattr(self, f) is not None] + list(self.extra)

    def __getitem__(self, item: str) -> Any:
        return getattr(self, item)

    def __repr__(self) -> str:
        if self.text:
            return f"Result({self.text})"
        return "Result(Formats: " + ", ".join(self.formats()) + ")"

    def _repr_html_(self) -> Optional[str]:
        return self.html

    def _repr_markdown_(self) -> Optional[str]:
        return self.markdown

    def _repr_png_(self) -> Optional[str]:
        return self.png


@dataclass(frozen=True)
class ExecutionError:
    """What the cell raised: ``name`` (ZeroDivisionError; ExitCode for a
    bash cell that exited non-zero), ``value`` (the message), ``traceback``."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class Logs:
    """What the cell printed, in the chunks it came in."""

    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)
    stdout_truncated: bool = False
    stderr_truncated: bool = False


@dataclass(frozen=True)
class Execution:
    """What a cell did (``CodeBox.run_code``)."""

    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: Optional[int] = None
    results_truncated: bool = False
    restarted: bool = False
    timed_out: bool = False

    @property
    def text(self) -> Optional[str]:
        """The main result's text (None when the cell has none)."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @staticmethod
    def from_json(text: Optional[str]) -> "Execution":
        d: Dict[str, Any] = json.loads(text) if text else {}
        lg = d.get("logs") or {}
        e = d.get("error")
        return Execution(
            results=[Result(r.get("data") or {}, bool(r.get("is_main_result"))) for r in d.get("results") or []],
            logs=Logs(list(lg.get("stdout") or []), list(lg.get("stderr") or []),
                      bool(lg.get("stdout_truncated")), bool(lg.get("stderr_truncated"))),
            error=ExecutionError(e.get("name", ""), e.get("value", ""), e.get("traceback", "")) if e else None,
            execution_count=d.get("execution_count"),
            results_truncated=bool(d.get("results_truncated")),
            restarted=bool(d.get("restarted")),
            timed_out=bool(d.get("timed_out")),
        )


_LANGUAGES = {"": "python", "python": "python", "python3": "python", "py": "python",
              "javascript": "javascript", "js": "javascript", "node": "javascript", "nodejs": "javascript",
              "bash": "bash", "sh": "bash", "shell": "bash"}


def normalize_language(language: Optional[str]) -> str:
    """python, javascript or bash (ValueError for others)."""
    if language is None:
        return "python"
    if not isinstance(language, str):
        raise TypeError(f"language must be str, not {type(language).__name__}")
    lang = _LANGUAGES.get(language.strip().lower())
    if lang is None:
        raise ValueError(f"language {language!r} is not python, javascript or bash")
    return lang


class CodeContext:
    """A code interpreter's context in a box: a Python or Node interpreter, or
    bash, whose cells keep their state and give rich results."""

    def __init__(self, box: "Box", handle: raw.Handle, language: str):
        self._box = box  # keeps the box handle alive
        self._h = handle
        self.language = language

    @classmethod
    async def start(cls, box: "Box", language: str = "python", *, cwd: Optional[str] = None,
                    env: Optional[Dict[str, str]] = None, user: Optional[str] = None,
                    grace: Optional[float] = None) -> "CodeContext":
        """Starts a context (NotFoundError when the image lacks the interpreter)."""
        lang = normalize_language(language)
        opts = _session_options(env=env, cwd=cwd, user=user, grace=grace)
        h = await blocking(raw.session_new, box._handle(), "code:" + lang, json.dumps(opts),
                           on_abandon=lambda h: h.close())
        return cls(box, h, lang)

    @property
    def closed(self) -> bool:
        return not self._h.alive

    def _handle(self) -> raw.Handle:
        if not self._h.alive:
            raise ClosedError(f"{self.language} code context is closed")
        return self._h

    async def run_code(self, code: str, *, timeout: Optional[float] = None,
                       envs: Optional[Dict[str, str]] = None) -> Execution:
        """Runs code as a cell; an exception in it is the execution's
        ``error``. ``timeout`` (seconds) interrupts the cell and raises
        TimeoutError (``e.execution``: what it did until then); cancelling
        the awaiting task interrupts it too. ``envs`` are set for this cell only."""
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        opts: Dict[str, Any] = {}
        t = check_timeout(timeout)
        if t:
            opts["timeout_secs"] = t
        e = check_env_dict(envs, "envs")
        if e:
            opts["env"] = e
        h = self._handle()
        try:
            out = await blocking(raw.session_run_code, h, code, json.dumps(opts) if opts else None)
        except TimeoutError as err:
            err.execution = Execution.from_json(getattr(err, "result_json", None))
            raise
        except asyncio.CancelledError:
            if h.alive:  # the cell goes on in its thread: stop it
                try:
                    raw.session_interrupt(h)
                except BoxliteError:
                    pass
            raise
        return Execution.from_json(out)

    async def restart(self) -> None:
        """A fresh interpreter: the context's state is gone, the count starts again."""
        await blocking(raw.session_reset, self._handle())

    def close(self) -> None:
        """Stops the interpreter. Idempotent."""
        self._h.close()


# E2B's names, and ours without the clash with boxlite.Execution (a process).
CodeExecution = Execution
CodeResult = Result
