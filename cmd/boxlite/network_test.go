package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

func TestParsePort(t *testing.T) {
	for in, want := range map[string]boxlite.Port{
		"80":                  {GuestPort: 80},
		"8080:80":             {HostPort: 8080, GuestPort: 80},
		"5353:53/udp":         {Protocol: "udp", HostPort: 5353, GuestPort: 53},
		"0.0.0.0:8080:80/tcp": {Protocol: "tcp", HostIP: "0.0.0.0", HostPort: 8080, GuestPort: 80},
		"127.0.0.1::80":       {HostIP: "127.0.0.1", GuestPort: 80},
		":80":                 {GuestPort: 80},
	} {
		got, err := parsePort(in)
		if err != nil || got != want {
			t.Errorf("parsePort(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "a:80", "1:2:3:4", "80:"} {
		if _, err := parsePort(in); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("parsePort(%q): %v, want invalid argument", in, err)
		}
	}
}

func TestPortsString(t *testing.T) {
	got := portsString([]boxlite.Port{{GuestPort: 80, HostPort: 8080}, {Protocol: "udp", HostIP: "0.0.0.0", HostPort: 53, GuestPort: 53}})
	if want := "127.0.0.1:8080->80/tcp, 0.0.0.0:53->53/udp"; got != want {
		t.Errorf("portsString = %q, want %q", got, want)
	}
}

func TestParseSecret(t *testing.T) {
	env := func(k string) string { return map[string]string{"TOKEN": "from-env"}[k] }
	for _, c := range []struct {
		in, name, value string
		hosts           []string
	}{
		{"openai=sk-a@b=c@api.openai.com", "openai", "sk-a@b=c", []string{"api.openai.com"}},
		{"gh=x@api.github.com, *.example.com:8443", "gh", "x", []string{"api.github.com", "*.example.com:8443"}},
		{"TOKEN@h.example", "TOKEN", "from-env", []string{"h.example"}},
	} {
		s, err := parseSecret(c.in, env)
		if err != nil || s.Name != c.name || s.Value != c.value || strings.Join(s.Hosts, "|") != strings.Join(c.hosts, "|") {
			t.Errorf("%q: %+v, %v", c.in, s, err)
		}
	}
	for _, in := range []string{"a=b", "a=b@", "UNSET@h", "=v@h"} {
		if _, err := parseSecret(in, env); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
