package k8sshim

import (
	"fmt"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A pod's own options, as pod annotations containerd passes to the
// runtime (its runtime's pod_annotations = ["io.boxlite.*"]), read from
// the sandbox's spec.
const (
	annPrefix = "io.boxlite."
	// annHostPorts publishes ports of a hostNetwork pod's box on the node:
	// comma-separated [[IP:]HOST:]GUEST[/tcp|udp] (the CLI's -p), where a
	// bare GUEST is the same port on the node and IP defaults to 0.0.0.0
	// (the node's addresses, which a hostNetwork pod's are).
	annHostPorts = annPrefix + "host-ports"
	// maxHostPortsAnn bounds the annotation's length (64 entries of
	// "255.255.255.255:65535:65535/udp" fit).
	maxHostPortsAnn = 4096
)

// hostPorts is the ports the pod's box publishes, from the sandbox's
// io.boxlite.* annotations: none without them. An unknown io.boxlite.*
// key, a bad entry, or host ports on a pod with a network namespace of
// its own are ErrInvalidArgument; too many ports ErrLimit.
func (s *spec) hostPorts() ([]boxlite.Port, error) {
	for k := range s.Annotations {
		if strings.HasPrefix(k, annPrefix) && k != annHostPorts {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "annotation %q: not a boxlite pod annotation (known: %s)", k, annHostPorts)
		}
	}
	v, ok := s.Annotations[annHostPorts]
	if !ok {
		return nil, nil
	}
	if !s.hostNetwork() {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "annotation %s: only for hostNetwork pods (a pod with a network namespace of its own publishes ports through CNI's portmap plugin, its hostPort)", annHostPorts)
	}
	if len(v) > maxHostPortsAnn {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "annotation %s: %d bytes, at most %d", annHostPorts, len(v), maxHostPortsAnn)
	}
	entries := strings.Split(v, ",")
	if len(entries) > boxlite.MaxPorts {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "annotation %s: %d ports, at most %d", annHostPorts, len(entries), boxlite.MaxPorts)
	}
	ports := make([]boxlite.Port, 0, len(entries))
	for _, e := range entries {
		e = strings.TrimSpace(e)
		p, err := protocol.ParsePort(e)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", annHostPorts, err)
		}
		if !strings.Contains(e, ":") {
			p.HostPort = p.GuestPort
		}
		if p.HostIP == "" {
			p.HostIP = "0.0.0.0"
		}
		if p.HostPort < 1 || p.HostPort > 65535 || p.GuestPort < 1 || p.GuestPort > 65535 {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "annotation %s: port %q: ports are 1..65535 (a free port, 0, is not one the pod's users could learn)", annHostPorts, e)
		}
		if p.Protocol != "" && p.Protocol != "tcp" && p.Protocol != "udp" {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "annotation %s: port %q: protocol %q is not tcp or udp", annHostPorts, e, p.Protocol)
		}
		ports = append(ports, p)
	}
	return ports, nil
}
