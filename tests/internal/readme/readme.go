// Package readme gives tests the code blocks of the repository's READMEs, so
// that what users copy is what the tests run.
//
// Every fenced block of README.md has, on the line right before its fence,
// a marker naming the test that runs it:
//
//	<!-- test: NAME -->
//
// or, only for a block that is not a program (a transcript, an output), the
// reason it is not run:
//
//	<!-- not run: REASON -->
//
// A NAME may mark several blocks (a kind of fragment and the wrapper its test
// puts around them, e.g. python-async-fragment: the body of an async def main
// with boxlite imported); Named returns them all. A test runs a marked block
// by calling Snippet, Named or NamedIn with its name (Go), `snippet "$repo/FILE" NAME`
// (tests/install's scripts, tests/c), or snippet(&readme, "NAME")
// (tests/rust/build.rs); tests/readme checks that every marker has its test.
package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Root is this checkout's top directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Path is the README's path in this checkout.
func Path() string { return filepath.Join(Root(), "README.md") }

// Block is one fenced code block of a Markdown file.
type Block struct {
	File   string // as given to Parse
	Line   int    // of the opening fence, from 1
	Lang   string // the fence's info string ("go", "sh", "")
	Test   string // the marker's NAME, or ""
	NotRun string // the not-run marker's reason, or ""
	Text   string // the block's lines, each ending in a newline
}

func (b Block) String() string { return fmt.Sprintf("%s:%d (```%s)", b.File, b.Line, b.Lang) }

const (
	testPrefix   = "<!-- test: "
	notRunPrefix = "<!-- not run: "
	markerSuffix = " -->"
)

// Parse reads the fenced blocks of the Markdown file at path, with their
// markers. A malformed marker (one not followed by a fence, an empty name) or
// an unclosed fence is an error.
func Parse(path string) ([]Block, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if isMarker(line) && (i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```")) {
			return nil, fmt.Errorf("%s:%d: the line after %q is not a fence", path, i+1, line)
		}
		if !strings.HasPrefix(line, "```") {
			continue
		}
		blk := Block{File: path, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		if i > 0 {
			prev := strings.TrimSpace(lines[i-1])
			switch {
			case strings.HasPrefix(prev, testPrefix) && strings.HasSuffix(prev, markerSuffix):
				blk.Test = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(prev, testPrefix), markerSuffix))
				if blk.Test == "" || strings.ContainsAny(blk.Test, " \t") {
					return nil, fmt.Errorf("%s:%d: %q: a test marker names one test", path, i, prev)
				}
			case strings.HasPrefix(prev, notRunPrefix) && strings.HasSuffix(prev, markerSuffix):
				blk.NotRun = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(prev, notRunPrefix), markerSuffix))
				if blk.NotRun == "" {
					return nil, fmt.Errorf("%s:%d: a not-run marker gives its reason", path, i)
				}
			}
		}
		var body strings.Builder
		closed := false
		for i++; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "```") {
				closed = true
				break
			}
			body.WriteString(lines[i] + "\n")
		}
		if !closed {
			return nil, fmt.Errorf("%s: the fence at line %d is not closed", path, blk.Line)
		}
		blk.Text = body.String()
		blocks = append(blocks, blk)
	}
	return blocks, nil
}

func isMarker(line string) bool {
	line = strings.TrimSpace(line)
	return (strings.HasPrefix(line, testPrefix) || strings.HasPrefix(line, notRunPrefix)) && strings.HasSuffix(line, markerSuffix)
}

// Named is every block of README.md marked `<!-- test: name -->`, in order;
// none is an error.
func Named(name string) ([]Block, error) { return NamedIn("README.md", name) }

// NamedIn is Named for another Markdown file of the checkout (rel: its path
// from the top, e.g. "bindings/node/README.md").
func NamedIn(rel, name string) ([]Block, error) {
	blocks, err := Parse(filepath.Join(Root(), rel))
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, b := range blocks {
		if b.Test == name {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no block marked <!-- test: %s -->", rel, name)
	}
	return out, nil
}

// Snippet is the code of the one block of README.md marked
// `<!-- test: name -->`.
func Snippet(name string) (string, error) {
	blocks, err := Named(name)
	if err != nil {
		return "", err
	}
	if len(blocks) != 1 {
		return "", fmt.Errorf("README.md has %d blocks marked <!-- test: %s -->, want one", len(blocks), name)
	}
	return blocks[0].Text, nil
}
