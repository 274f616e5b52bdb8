package serve

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

// TestPlainListenBeyondLoopback: without TLS, neither the API nor the
// tunnel listener may reach beyond this machine (a tunnel's token is a
// key) unless --insecure-no-tls says a proxy in front terminates TLS.
func TestPlainListenBeyondLoopback(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		flag string // "" when it must start
	}{
		{Config{Listen: "0.0.0.0:0"}, "--listen"},
		{Config{Listen: "127.0.0.1:0", TunnelListen: "0.0.0.0:0"}, "--tunnel-listen"},
		{Config{Listen: "127.0.0.1:0", TunnelListen: "[::]:0"}, "--tunnel-listen"},
	} {
		_, err := New(c.cfg, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), c.flag+" ") {
			t.Errorf("%+v: %v; want invalid_argument naming %s", c.cfg, err, c.flag)
		}
	}
	for _, c := range []struct {
		flag, addr    string
		tls, insecure bool
	}{
		{"--tunnel-listen", "127.0.0.1:0", false, false},
		{"--tunnel-listen", "0.0.0.0:0", true, false},
		{"--tunnel-listen", "0.0.0.0:0", false, true},
	} {
		if err := checkListen(c.flag, c.addr, c.tls, c.insecure); err != nil {
			t.Errorf("%s %s (tls %v, insecure %v): %v", c.flag, c.addr, c.tls, c.insecure, err)
		}
	}
}
