#!/usr/bin/env python3
"""tests/install/snippet.py FILE NAME: print the code of the fenced block that follows the line
`<!-- test: NAME -->` in FILE (a README), so that a test runs the README's own text. Fails when
the marker, or a fence right after it, is missing.

tests/install/snippet.py --check FILE...: fails unless every marker in the FILEs is run by one
of the install tests (tests/install/*.sh name it), so that no marked snippet goes untested."""

import glob
import os
import re
import sys


def snippet(path: str, name: str) -> str:
    lines = open(path, encoding="utf-8").read().split("\n")
    marker = "<!-- test: %s -->" % name
    for i, line in enumerate(lines):
        if line.strip() != marker:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            raise SystemExit("%s: the line after %r is not a fence" % (path, marker))
        body = []
        for l in lines[i + 2:]:
            if l.startswith("```"):
                return "\n".join(body) + "\n"
            body.append(l)
        raise SystemExit("%s: the fence after %r is not closed" % (path, marker))
    raise SystemExit("%s: no %r" % (path, marker))


def check(paths: list) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    scripts = "".join(open(f).read() for f in glob.glob(os.path.join(here, "*.sh")))
    unrun = []
    for path in paths:
        for name in re.findall(r"^<!-- test: (\S+) -->$", open(path, encoding="utf-8").read(), re.M):
            snippet(path, name)  # a fence follows
            rel = os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.dirname(here)))
            if not re.search(r'snippet "\$repo/%s" %s\b' % (re.escape(rel), re.escape(name)), scripts):
                unrun.append("%s: %s" % (path, name))
    if unrun:
        raise SystemExit("marked snippets no install test runs:\n  " + "\n  ".join(unrun))


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(sys.argv[2:])
    else:
        sys.stdout.write(snippet(sys.argv[1], sys.argv[2]))
