package boxlite

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestPrestartValidation(t *testing.T) {
	for _, ok := range [][]string{nil, {"python"}, {"shell"}, {"python", "shell:/bin/bash"}} {
		c := defaultBoxConfig("alpine")
		c.Prestart = ok
		if err := c.validate(); err != nil {
			t.Errorf("prestart %q: %v", ok, err)
		}
	}
	for bad, want := range map[string][]string{
		`"ruby"`:       {"ruby"},
		`"python:`:     {"python:/usr/bin/python3"},
		`"shell:bash"`: {"shell:bash"},
		"twice":        {"shell", "shell:/bin/bash"},
		"at most 2":    {"python", "shell", "python"},
	} {
		c := defaultBoxConfig("alpine")
		c.Prestart = want
		err := c.validate()
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), bad) {
			t.Errorf("prestart %q: %v, want invalid_argument naming %s", want, err, bad)
		}
	}
}
