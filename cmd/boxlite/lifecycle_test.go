package main

import (
	"reflect"
	"testing"
)

// What a box wrote to its console cannot drive the user's terminal.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"ok\tline\n":         "ok\tline\n",
		"power down\r\n":     "power down\n",
		"\x1b]0;pwned\x07x":  "?]0;pwned?x",
		"csi \u009b31m \x7f": "csi ?31m ?",
		"bad \xff utf8 é":    "bad \uFFFD utf8 é",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestImageAndCommand(t *testing.T) {
	for _, c := range []struct {
		args  []string
		image string
		argv  []string
	}{
		{[]string{"alpine"}, "alpine", []string{}},
		{[]string{"alpine", "--", "sh", "-c", "x"}, "alpine", []string{"sh", "-c", "x"}},
		{[]string{"alpine", "echo", "--", "hi"}, "alpine", []string{"echo", "--", "hi"}},
	} {
		img, argv, err := imageAndCommand("t", c.args)
		if err != nil || img != c.image || !reflect.DeepEqual(argv, c.argv) {
			t.Errorf("imageAndCommand(%q) = %q %q %v", c.args, img, argv, err)
		}
	}
	if _, _, err := imageAndCommand("t", nil); err == nil {
		t.Error("no IMAGE: no error")
	}
}
