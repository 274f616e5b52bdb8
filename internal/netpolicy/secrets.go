package netpolicy

import (
	"fmt"
	"strconv"
	"strings"
)

// SecretPort is where a secret's host is reached when its entry names no
// port: HTTPS.
const SecretPort = 443

// SecretHost is one entry of a secret's hosts: a host name ("api.example.com"),
// a wildcard ("*.example.com": any name below it, as in allow_net), each
// optionally with ":port" (default SecretPort). Only HTTPS to such a host
// and port carries the secret's value.
type SecretHost struct {
	Name string // lower case, no trailing dot; "*.x" for a wildcard
	Port uint16
}

// ParseSecretHost parses one entry of a secret's hosts.
func ParseSecretHost(s string) (SecretHost, error) {
	h := SecretHost{Port: SecretPort}
	s = strings.TrimSpace(s)
	if s == "" {
		return h, fmt.Errorf("empty host")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/[]") {
		return h, fmt.Errorf("%q: a host name is expected, not a URL or an address", s)
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := strconv.ParseUint(s[i+1:], 10, 16)
		if err != nil || p == 0 {
			return h, fmt.Errorf("%q: port is not 1..65535", s)
		}
		s, h.Port = s[:i], uint16(p)
	}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	if !validName(strings.TrimPrefix(name, "*.")) || strings.Count(name, "*") > 1 {
		return h, fmt.Errorf("%q is not a host name (addresses are not: TLS names a host)", s)
	}
	h.Name = name
	return h, nil
}

// Match reports whether a TLS server name (SNI) on port is this host.
func (h SecretHost) Match(name string, port uint16) bool {
	if port != h.Port {
		return false
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	return Rule{Name: h.Name}.matchName(name)
}

// String is the entry in canonical form.
func (h SecretHost) String() string {
	if h.Port == SecretPort {
		return h.Name
	}
	return h.Name + ":" + strconv.Itoa(int(h.Port))
}

// Grant is the allow_net rule a secret's host adds to a box's list (as
// BoxLite: a secret's host is reachable on its port even when allow_net
// does not list it). With an empty allow_net everything is reachable and
// nothing is added.
func (h SecretHost) Grant() string { return h.Name + ":" + strconv.Itoa(int(h.Port)) }

// WithGrants is allowNet with the grants of hosts added (none when allowNet
// is empty: it reaches everything already).
func WithGrants(allowNet []string, hosts []SecretHost) []string {
	if len(allowNet) == 0 {
		return allowNet
	}
	out := append([]string(nil), allowNet...)
	seen := map[string]bool{}
	for _, e := range allowNet {
		seen[e] = true
	}
	for _, h := range hosts {
		if g := h.Grant(); !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}
