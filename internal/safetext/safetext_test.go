package safetext

import "testing"

// What a box wrote cannot drive the user's terminal, on many lines or one.
func TestTextAndLine(t *testing.T) {
	for _, c := range []struct{ in, text, line string }{
		{"ok\tline\n", "ok\tline\n", "ok line "},
		{"power down\r\n", "power down\n", "power down "},
		{"\x1b]0;pwned\x07x", "?]0;pwned?x", "?]0;pwned?x"},
		{"csi \u009b31m \x7f", "csi ?31m ?", "csi ?31m ?"},
		{"bad \xff utf8 é", "bad \uFFFD utf8 é", "bad \uFFFD utf8 é"},
		{"alpine\u202egnp.exe", "alpine?gnp.exe", "alpine?gnp.exe"},
		{"\x1b[2J\x1b[Halpine:latest", "?[2J?[Halpine:latest", "?[2J?[Halpine:latest"},
		{"plain", "plain", "plain"},
	} {
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
	}
}
