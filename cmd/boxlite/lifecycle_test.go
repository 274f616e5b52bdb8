package main

import (
	"reflect"
	"testing"
)

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
