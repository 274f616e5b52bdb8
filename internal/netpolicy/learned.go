package netpolicy

import (
	"net/netip"
	"sync"
)

// Learned is what DNS answers taught: the addresses names resolved to, each
// with the ports those names are reachable on (0: any). It keeps the newest
// max addresses, so a box that resolves names without end cannot grow it.
// The zero value is not usable; NewLearned makes one. Safe for concurrent use.
type Learned struct {
	mu    sync.Mutex
	max   int
	ports map[netip.Addr][]uint16
	order []netip.Addr
}

// NewLearned makes a table of at most max addresses.
func NewLearned(max int) *Learned {
	return &Learned{max: max, ports: map[netip.Addr][]uint16{}}
}

// Add records that addr serves ports (merged with those it has).
func (l *Learned) Add(addr netip.Addr, ports []uint16) {
	if len(ports) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ports[addr]; !ok {
		l.order = append(l.order, addr)
		if len(l.order) > l.max {
			delete(l.ports, l.order[0])
			l.order = l.order[1:]
		}
	}
	have := l.ports[addr]
	for _, a := range ports {
		found := false
		for _, h := range have {
			found = found || h == a
		}
		if !found {
			have = append(have, a)
		}
	}
	l.ports[addr] = have
}

// Allows reports whether addr was learned for port (or for any port, 0).
func (l *Learned) Allows(addr netip.Addr, port uint16) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.ports[addr] {
		if p == 0 || p == port {
			return true
		}
	}
	return false
}
