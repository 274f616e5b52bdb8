package protocol

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
)

// ParsePort reads a published port as docker's -p writes it:
// [[IP:]HOST:]GUEST[/PROTO]; an absent or empty HOST is 0 (a free port).
// It checks the syntax only; the runtime checks ranges and addresses.
func ParsePort(s string) (Port, error) {
	var p Port
	bad := func(why string) (Port, error) {
		return Port{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "port %q: %s (want [[IP:]HOST:]GUEST[/tcp|udp])", s, why)
	}
	spec, proto, _ := strings.Cut(s, "/")
	p.Protocol = proto
	parts := strings.Split(spec, ":")
	if len(parts) > 3 {
		return bad("too many ':'")
	}
	num := func(v string, what string, empty bool) (int, error) {
		if v == "" && empty {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a number", what, v)
		}
		return n, nil
	}
	var err error
	if p.GuestPort, err = num(parts[len(parts)-1], "guest port", false); err != nil {
		return bad(err.Error())
	}
	if len(parts) >= 2 {
		if p.HostPort, err = num(parts[len(parts)-2], "host port", true); err != nil {
			return bad(err.Error())
		}
	}
	if len(parts) == 3 {
		p.HostIP = parts[0]
	}
	return p, nil
}
