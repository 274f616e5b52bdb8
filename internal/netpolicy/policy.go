package netpolicy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// HostAlias is the name a box reaches the host's loopback by, and
// HostAliasAddr the address it resolves to inside the box.
const HostAlias = protocol.HostAliasName

var HostAliasAddr = netip.MustParseAddr(protocol.HostAliasIP)

// Limits on what a policy holds: rules as given, and addresses learned from
// DNS answers for allowed names (the oldest are forgotten first).
const (
	MaxRules   = 256
	maxLearned = 4096
)

// Rule is one allow_net entry: a host name ("example.com"), a wildcard
// ("*.example.com": any name below it, not the name itself), an address or a
// network in CIDR form, each optionally with ":port" (any port when absent).
type Rule struct {
	Name     string       // lower case, no trailing dot; "*.x" for a wildcard
	Prefix   netip.Prefix // when the rule is an address or network
	Port     uint16       // 0: any
	Original string
}

// Policy decides what a box may reach. A nil *Policy allows everything
// (no allow_net given).
type Policy struct {
	rules []Rule

	mu      sync.Mutex
	learned map[netip.Addr][]uint16 // address -> ports (0: any) from allowed names' answers
	order   []netip.Addr
}

// DenyAll is a policy that allows nothing: an outbound network turned off
// on a running box, whose NIC stays (it cannot be unplugged).
func DenyAll() *Policy { return &Policy{learned: map[netip.Addr][]uint16{}} }

// Parse turns allow_net entries into a Policy. An empty list gives nil: no
// restriction. Bad entries are ErrInvalidArgument naming the entry.
func Parse(entries []string) (*Policy, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if len(entries) > MaxRules {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "allow_net: %d entries, at most %d", len(entries), MaxRules)
	}
	p := &Policy{learned: map[netip.Addr][]uint16{}}
	for _, e := range entries {
		r, err := parseRule(e)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "allow_net entry %q: %v", e, err)
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

func parseRule(e string) (Rule, error) {
	r := Rule{Original: e}
	s := strings.TrimSpace(e)
	if s == "" {
		return r, fmt.Errorf("empty")
	}
	if strings.Contains(s, "://") {
		return r, fmt.Errorf("a host, address or CIDR is expected, not a URL")
	}
	// A port: "host:443", "1.2.3.4:80", "10.0.0.0/8:443", "[::1]:80".
	host := s
	if strings.Count(s, ":") == 1 || strings.HasPrefix(s, "[") {
		h, portStr, ok := cutPort(s)
		if !ok {
			return r, fmt.Errorf("bad port")
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || port == 0 {
			return r, fmt.Errorf("port %q is not 1..65535", portStr)
		}
		host, r.Port = h, uint16(port)
	}
	if pfx, err := netip.ParsePrefix(host); err == nil {
		if !pfx.Addr().Is4() {
			return r, fmt.Errorf("box networks are IPv4 only")
		}
		r.Prefix = pfx.Masked()
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return r, fmt.Errorf("box networks are IPv4 only")
		}
		r.Prefix = netip.PrefixFrom(a, 32)
		return r, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	base := strings.TrimPrefix(name, "*.")
	if !validName(base) {
		return r, fmt.Errorf("%q is not a host name, address or CIDR", host)
	}
	r.Name = name
	return r, nil
}

// cutPort splits "host:port" and "[v6]:port".
func cutPort(s string) (host, port string, ok bool) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]:")
		if end < 0 {
			return "", "", false
		}
		return s[1:end], s[end+2:], true
	}
	i := strings.LastIndexByte(s, ':')
	return s[:i], s[i+1:], i > 0 && i < len(s)-1
}

// validName: dot-separated labels of letters, digits, '-' and '_', as DNS
// names are written (at most 253 bytes, labels 1..63).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Rules returns the policy's rules as given.
func (p *Policy) Rules() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.Original
	}
	return out
}

func (r Rule) matchName(name string) bool {
	if base, ok := strings.CutPrefix(r.Name, "*."); ok {
		return strings.HasSuffix(name, "."+base)
	}
	return r.Name != "" && name == r.Name
}

// AllowName reports whether DNS may resolve name (any port of a rule for it
// will do: the port is checked when the box connects).
func (p *Policy) AllowName(name string) bool {
	if p == nil {
		return true
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, r := range p.rules {
		if name == HostAlias {
			// Only a rule naming the alias itself, never a wildcard.
			if r.Name == HostAlias || r.Prefix == netip.PrefixFrom(HostAliasAddr, 32) {
				return true
			}
			continue
		}
		if r.matchName(name) {
			return true
		}
	}
	return false
}

// Learn records that DNS answered addr for name, so connections to addr are
// allowed on the ports the name's rules allow. It does nothing for names the
// policy does not allow.
func (p *Policy) Learn(name string, addr netip.Addr) {
	if p == nil {
		return
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	var ports []uint16
	for _, r := range p.rules {
		if r.matchName(name) {
			ports = append(ports, r.Port)
		}
	}
	if len(ports) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.learned[addr]; !ok {
		p.order = append(p.order, addr)
		if len(p.order) > maxLearned {
			delete(p.learned, p.order[0])
			p.order = p.order[1:]
		}
	}
	p.learned[addr] = mergePorts(p.learned[addr], ports)
}

func mergePorts(have, add []uint16) []uint16 {
	for _, a := range add {
		found := false
		for _, h := range have {
			found = found || h == a
		}
		if !found {
			have = append(have, a)
		}
	}
	return have
}

// AllowAddr reports whether the box may reach addr:port (TCP or UDP): an
// address or network rule covers it, or an allowed name resolved to it.
// The host alias counts as its own address: it is allowed only when a rule
// names it (by name or by address), never by a wider network.
func (p *Policy) AllowAddr(addr netip.Addr, port uint16) bool {
	if p == nil {
		return true
	}
	alias := addr == HostAliasAddr
	for _, r := range p.rules {
		if r.Port != 0 && r.Port != port {
			continue
		}
		if alias {
			if r.Name == HostAlias || r.Prefix == netip.PrefixFrom(HostAliasAddr, 32) {
				return true
			}
			continue
		}
		if r.Prefix.IsValid() && r.Prefix.Contains(addr) {
			return true
		}
	}
	if alias {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, allowed := range p.learned[addr] {
		if allowed == 0 || allowed == port {
			return true
		}
	}
	return false
}
