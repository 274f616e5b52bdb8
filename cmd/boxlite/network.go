package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

// parsePort reads a -p value as docker does: [[IP:]HOST:]GUEST[/PROTO]; an
// absent or empty HOST is 0 (a free port). the runtime checks the ranges.
func parsePort(s string) (boxlite.Port, error) {
	var p boxlite.Port
	bad := func(why string) (boxlite.Port, error) {
		return p, errdefs.Errorf(errdefs.ErrInvalidArgument, "-p %q: %s (want [[IP:]HOST:]GUEST[/tcp|udp])", s, why)
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

// networkOptions turns --network, --allow-net and -p into the create
// options' network (nil: the default) and ports.
func networkOptions(mode string, allow, ports []string) (*abi.Network, []abi.Port, error) {
	var spec *abi.Network
	if mode != "" {
		spec = &abi.Network{Mode: mode}
	}
	for _, a := range allow {
		for _, e := range strings.Split(a, ",") {
			if e = strings.TrimSpace(e); e != "" {
				if spec == nil {
					spec = &abi.Network{}
				}
				spec.AllowNet = append(spec.AllowNet, e)
			}
		}
	}
	var out []abi.Port
	for _, s := range ports {
		p, err := parsePort(s)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, abi.Port{Protocol: p.Protocol, HostIP: p.HostIP, HostPort: p.HostPort, GuestPort: p.GuestPort})
	}
	return spec, out, nil
}

// portsString shows ports as docker ps does: 127.0.0.1:8080->80/tcp, ...
func portsString(ports []boxlite.Port) string {
	var out []string
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		ip := p.HostIP
		if ip == "" {
			ip = "127.0.0.1"
		}
		out = append(out, fmt.Sprintf("%s:%d->%d/%s", ip, p.HostPort, p.GuestPort, proto))
	}
	return strings.Join(out, ", ")
}

// boxPorts are a box's published ports: as bound while it runs, else as
// configured (0: a free port at each start).
func boxPorts(i boxlite.BoxInfo) []boxlite.Port {
	if i.Runtime != nil && i.Runtime.Network != nil {
		return i.Runtime.Network.Ports
	}
	return i.Config.Ports
}
