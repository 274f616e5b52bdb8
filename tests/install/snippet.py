#!/usr/bin/env python3
"""tests/install/snippet.py FILE NAME: print the code of the fenced block that follows the line
`<!-- test: NAME -->` in FILE (a README), so that a test runs the README's own text. Fails when
the marker, or a fence right after it, is missing.

The markers are tests/internal/readme's; tests/readme's TestEveryBlockIsRun fails when a marker
names a test that does not run its block (these scripts' `snippet "$repo/FILE" NAME`)."""

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


if __name__ == "__main__":
    sys.stdout.write(snippet(sys.argv[1], sys.argv[2]))
