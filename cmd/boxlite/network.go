package main

import (
	"fmt"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
)

// parsePort reads a -p value: [[IP:]HOST:]GUEST[/PROTO] (protocol.ParsePort).
func parsePort(s string) (boxlite.Port, error) {
	p, err := protocol.ParsePort(s)
	if err != nil {
		return p, fmt.Errorf("-p: %w", err)
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
