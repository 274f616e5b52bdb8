#!/usr/bin/env python3
"""The sync classes' declarations for type checkers (the `if TYPE_CHECKING:` blocks in
boxlite/sync_api.py) say what the async methods they stand for take and give: parameter names,
kinds, annotations and defaults, and the return annotation. Run with the Python whose boxlite to
check; exits non-zero naming each difference."""

import ast
import inspect
import sys

import boxlite
from boxlite import sync_api

mismatches = []
tree = ast.parse(inspect.getsource(sync_api))
checked = 0
for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
    sync_cls = getattr(sync_api, cls.name)
    async_cls = next((k for k, v in sync_api._SYNC.items() if v is sync_cls), None)
    for block in (n for n in cls.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"):
        for fn in (n for n in block.body if isinstance(n, ast.FunctionDef)):
            if fn.name.startswith("__"):
                continue
            if async_cls is None:
                mismatches.append("%s.%s: %s wraps no async class" % (cls.name, fn.name, cls.name))
                continue
            sig = inspect.signature(getattr(async_cls, fn.name))
            want = [(p.name, p.kind, p.annotation, None if p.default is p.empty else repr(p.default))
                    for p in sig.parameters.values()]
            args = fn.args
            got = []
            pos = args.posonlyargs + args.args
            defaults = [None] * (len(pos) - len(args.defaults)) + args.defaults
            for a, d in zip(pos, defaults):
                got.append((a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            ast.unparse(a.annotation) if a.annotation else inspect.Parameter.empty,
                            None if d is None else repr(ast.literal_eval(d))))
            if args.vararg:
                got.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, ast.unparse(args.vararg.annotation), None))
            for a, d in zip(args.kwonlyargs, args.kw_defaults):
                got.append((a.arg, inspect.Parameter.KEYWORD_ONLY, ast.unparse(a.annotation),
                            None if d is None else repr(ast.literal_eval(d))))
            want[0] = got[0]  # self
            if got != want:
                mismatches.append("%s.%s: declared %s, %s.%s has %s" % (cls.name, fn.name, got, async_cls.__name__, fn.name, want))
            if ast.unparse(fn.returns) != sig.return_annotation:
                mismatches.append("%s.%s returns %s, %s.%s %s" % (cls.name, fn.name, ast.unparse(fn.returns),
                                                                  async_cls.__name__, fn.name, sig.return_annotation))
            checked += 1
if checked == 0:
    mismatches.append("no declarations found in sync_api's TYPE_CHECKING blocks")
if mismatches:
    sys.exit("\n".join(mismatches))
print("sync declarations match the async methods (%d checked, boxlite %s)" % (checked, boxlite.__version__))
