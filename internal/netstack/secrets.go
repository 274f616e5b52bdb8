package netstack

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Secrets is what the stack needs to put secrets' values into a box's
// HTTPS requests (see intercept.go): the secrets, the box's CA (its
// certificate is in the box's trust stores; its key signs the certificates
// the stack shows the box), and the roots it verifies the real servers
// against (the host's trust store).
type Secrets struct {
	List  []shimapi.Secret
	CA    *x509.Certificate
	CAKey crypto.Signer
	Roots *x509.CertPool
}

// ParseSecrets builds Secrets from the shim's hand-over: the secrets file's
// content and the host's trust store in PEM.
func ParseSecrets(s shimapi.Secrets, rootsPEM []byte) (*Secrets, error) {
	cert, err := tls.X509KeyPair([]byte(s.CACertPEM), []byte(s.CAKeyPEM))
	if err != nil {
		return nil, fmt.Errorf("secrets: the box's CA: %w", err)
	}
	ca, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("secrets: the box's CA: %w", err)
	}
	key, ok := cert.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("secrets: the box's CA key cannot sign")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootsPEM) {
		return nil, fmt.Errorf("secrets: the host's trust store holds no certificate (SSL_CERT_FILE, SSL_CERT_DIR)")
	}
	for _, sec := range s.Secrets {
		for _, h := range sec.Hosts {
			if _, err := netpolicy.ParseSecretHost(h); err != nil {
				return nil, fmt.Errorf("secrets: %s: %w", sec.Name, err)
			}
		}
	}
	return &Secrets{List: s.Secrets, CA: ca, CAKey: key, Roots: roots}, nil
}

// Bounds of what the interception keeps.
const (
	maxLeafCerts     = 256
	leafLifetime     = 24 * time.Hour
	maxSecretAddrs   = 4096
	maxInterceptHead = 64 << 10 // bytes of a ClientHello (and what came with it)
)

// secretState is the stack's side of the secrets: which addresses DNS gave
// the box for their hosts, and the certificates made so far.
type secretState struct {
	*Secrets
	hosts []netpolicy.SecretHost

	mu    sync.Mutex
	addrs map[netip.Addr][]uint16 // address -> ports of secret hosts that resolved to it
	order []netip.Addr
	leafs map[string]*tls.Certificate
}

func newSecretState(s *Secrets) *secretState {
	st := &secretState{Secrets: s, addrs: map[netip.Addr][]uint16{}, leafs: map[string]*tls.Certificate{}}
	for _, sec := range s.List {
		for _, h := range sec.Hosts {
			sh, _ := netpolicy.ParseSecretHost(h) // checked by ParseSecrets
			st.hosts = append(st.hosts, sh)
		}
	}
	return st
}

// learn records that DNS answered addr for name, when name is a secret's host.
func (s *secretState) learn(name string, addr netip.Addr) {
	if s == nil {
		return
	}
	var ports []uint16
	for _, h := range s.hosts {
		if h.Match(name, h.Port) {
			ports = append(ports, h.Port)
		}
	}
	if len(ports) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.addrs[addr]; !ok {
		s.order = append(s.order, addr)
		if len(s.order) > maxSecretAddrs {
			delete(s.addrs, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.addrs[addr] = mergePorts(s.addrs[addr], ports)
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

// candidate reports whether a connection to dst:port may be HTTPS to a
// secret's host, so the stack reads its ClientHello before it decides.
func (s *secretState) candidate(dst netip.Addr, port uint16) bool {
	if s == nil {
		return false
	}
	if dst == boxnet.HostIP {
		for _, h := range s.hosts {
			if h.Match(netpolicy.HostAlias, port) {
				return true
			}
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.addrs[dst] {
		if p == port {
			return true
		}
	}
	return false
}

// pairs returns the placeholder/value pairs of the secrets whose hosts
// include name on port: the only ones substituted on that connection.
func (s *secretState) pairs(name string, port uint16) [][2][]byte {
	var out [][2][]byte
	for _, sec := range s.List {
		for _, h := range sec.Hosts {
			if sh, err := netpolicy.ParseSecretHost(h); err == nil && sh.Match(name, port) {
				out = append(out, [2][]byte{[]byte(sec.Placeholder), []byte(sec.Value)})
				break
			}
		}
	}
	return out
}

// leaf returns a certificate for name signed by the box's CA.
func (s *secretState) leaf(name string) (*tls.Certificate, error) {
	name = strings.ToLower(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.leafs[name]; ok && time.Until(c.Leaf.NotAfter) > leafLifetime/2 {
		return c, nil
	}
	if len(s.leafs) >= maxLeafCerts {
		s.leafs = map[string]*tls.Certificate{}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CA, &key.PublicKey, s.CAKey)
	if err != nil {
		return nil, err
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der, s.CA.Raw}, PrivateKey: key, Leaf: leaf}
	s.leafs[name] = c
	return c, nil
}
