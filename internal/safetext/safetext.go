package safetext

import (
	"strings"
	"unicode/utf8"
)

// Replacement stands for each control character taken out.
const Replacement = '?'

// Text is s made safe for a terminal or an error message, keeping its lines:
// carriage returns are dropped; newlines and tabs stay; every other control
// character (C0, DEL, C1 such as the 8-bit CSI U+009B) and the Unicode
// controls that reorder or hide text (bidirectional overrides and isolates,
// zero-width marks) become Replacement; invalid UTF-8 becomes U+FFFD. What is
// left cannot move the cursor, retitle a window, write the clipboard or
// disguise what it says.
func Text(s string) string { return clean(s, false) }

// Line is Text on one line: newlines and tabs become spaces too. For a
// table cell, a name, or a value quoted in a one-line message.
func Line(s string) string { return clean(s, true) }

func clean(s string, oneLine bool) string {
	safe := utf8.ValidString(s)
	if safe {
		for _, r := range s {
			if Unsafe(r) || oneLine && (r == '\n' || r == '\t') {
				safe = false
				break
			}
		}
	}
	if safe {
		return s // the common case: no copy
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\r':
			continue
		case r == '\n' || r == '\t':
			if oneLine {
				r = ' '
			}
		case Unsafe(r):
			r = Replacement
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Unsafe reports whether Text takes r out: a control character (but
// newline and tab, which Text keeps and Line turns into spaces), or one
// that changes how the text around it shows. For output that escapes such
// characters instead of replacing them (JSON).
func Unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200b, r == 0x200e, r == 0x200f, r == 0xfeff,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // Arabic letter mark, zero-width space, LRM/RLM, BOM; embeddings, overrides, isolates
	}
	return false
}
