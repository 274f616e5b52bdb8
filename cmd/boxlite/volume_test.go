package main

import (
	"testing"

	"github.com/boxlite/boxlite"
)

func TestParseVolume(t *testing.T) {
	for _, c := range []struct {
		in   string
		want boxlite.Volume
	}{
		{"/a:/b", boxlite.Volume{HostPath: "/a", GuestPath: "/b"}},
		{"/a:/b:ro", boxlite.Volume{HostPath: "/a", GuestPath: "/b", ReadOnly: true}},
		{"/a:/b:rw,size=512m", boxlite.Volume{HostPath: "/a", GuestPath: "/b", SizeLimitBytes: 512 << 20}},
		{"/a:/b:size=2GiB", boxlite.Volume{HostPath: "/a", GuestPath: "/b", SizeLimitBytes: 2 << 30}},
		{"/a:/b:size=1048576", boxlite.Volume{HostPath: "/a", GuestPath: "/b", SizeLimitBytes: 1 << 20}},
	} {
		got, err := parseVolume(c.in)
		if err != nil || got != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"/a", "/a:/b:rx", "/a:/b:size=", "/a:/b:size=-1", "/a:/b:size=1x", "/a:/b:size=99999999999t", "/a:/b:c:d"} {
		if v, err := parseVolume(in); err == nil {
			t.Errorf("%q: %+v, want an error", in, v)
		}
	}
}
