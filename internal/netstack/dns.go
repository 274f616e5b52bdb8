package netstack

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/boxlite/boxlite/internal/netpolicy"
)

const (
	dnsTimeout = 5 * time.Second
	dnsTTL     = 60
	// maxLookups bounds the box's lookups in flight on the host's resolver;
	// more get SERVFAIL at once.
	maxLookups = 32
)

// serveDNS answers the box's DNS on GatewayIP:53, over UDP and TCP: the box
// has no other resolver (any other is just a destination allow_net rules
// on). Names the policy does not allow are NXDOMAIN; A answers come from the
// host's resolver, and the policy learns them, except that with allow_net an
// answer pointing at a private or special range or at the host's own
// addresses is dropped unless a rule names that address or network
// (netpolicy.AllowAnswer): an allowed name cannot lead the box to the host's
// side of the network.
func (n *Stack) serveDNS() error {
	addr := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(boxnet.GatewayIP.As4()), Port: 53}
	pc, err := gonet.DialUDP(n.stack, &addr, nil, ipv4.ProtocolNumber)
	if err != nil {
		return err
	}
	ln, err := gonet.ListenTCP(n.stack, addr, ipv4.ProtocolNumber)
	if err != nil {
		pc.Close()
		return err
	}
	h := dns.HandlerFunc(n.answer)
	udpSrv := &dns.Server{PacketConn: pc, Handler: h}
	tcpSrv := &dns.Server{Listener: ln, Handler: h, ReadTimeout: dnsTimeout, WriteTimeout: dnsTimeout,
		MaxTCPQueries: 16}
	go udpSrv.ActivateAndServe()
	go tcpSrv.ActivateAndServe()
	n.closers = append(n.closers, pc, ln)
	return nil
}

func (n *Stack) answer(w dns.ResponseWriter, q *dns.Msg) {
	n.stats.dns.Add(1)
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	if len(q.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	question := q.Question[0]
	name := strings.TrimSuffix(strings.ToLower(question.Name), ".")
	switch {
	case !n.pol().AllowName(name):
		n.stats.blocked.Add(1)
		n.logOnce("dns "+name, "network: refused DNS name %q: not in allow_net", truncate(name, 253))
		m.Rcode = dns.RcodeNameError
	case question.Qclass != dns.ClassINET:
		m.Rcode = dns.RcodeNotImplemented
	case name == netpolicy.HostAlias:
		if question.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, aRecord(question.Name, boxnet.HostIP))
		}
	case question.Qtype == dns.TypeA:
		select {
		case n.lookups <- struct{}{}:
		default:
			n.stats.dropped.Add(1)
			m.Rcode = dns.RcodeServerFailure
			w.WriteMsg(m)
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, dnsTimeout)
		ips, err := n.cfg.Lookup(ctx, name)
		cancel()
		<-n.lookups
		if err != nil {
			if de, ok := err.(*net.DNSError); ok && de.IsNotFound {
				m.Rcode = dns.RcodeNameError
			} else {
				m.Rcode = dns.RcodeServerFailure
			}
			break
		}
		for _, ip := range ips {
			ip = ip.Unmap()
			if p := n.pol(); p != nil && !p.AllowAnswer(ip, hostAddr(ip)) {
				n.stats.blocked.Add(1)
				n.logOnce("dns "+name+" "+ip.String(), "network: dropped %s from the DNS answer for %q: a private, special or host address that allow_net does not list",
					ip, truncate(name, 253))
				continue
			}
			n.pol().Learn(name, ip)
			n.secrets.learn(name, ip)
			m.Answer = append(m.Answer, aRecord(question.Name, ip))
		}
	default:
		// AAAA and the rest: the box network is IPv4 only, and other
		// records would need a resolver of the host's the box cannot
		// trust to keep to the policy. An empty answer, not an error, so
		// resolvers fall back to A at once.
	}
	if size := udpSize(w, q); size > 0 {
		m.Truncate(size)
	}
	w.WriteMsg(m)
}

func aRecord(name string, ip netip.Addr) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsTTL}, A: ip.AsSlice()}
}

// udpSize is the answer size a UDP query allows (0 over TCP).
func udpSize(w dns.ResponseWriter, q *dns.Msg) int {
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		return 0
	}
	if o := q.IsEdns0(); o != nil {
		return int(max(o.UDPSize(), dns.MinMsgSize))
	}
	return dns.MinMsgSize
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
