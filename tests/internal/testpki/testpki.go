// Package testpki makes a test CA and server certificates from it, for
// tests whose HTTPS servers a box or a client must verify (through
// SSL_CERT_FILE naming the CA).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	PEM  []byte // its certificate
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

// New makes a CA valid for a day.
func New(t testing.TB) *CA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "boxlite test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key, next: 2}
}

// WriteCA writes the CA's certificate to dir and returns its path (for
// SSL_CERT_FILE).
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	f := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(f, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// Leaf is a server certificate for names (an IP address becomes an IP
// SAN, anything else a DNS name).
func (ca *CA) Leaf(t testing.TB, names ...string) tls.Certificate {
	c, _ := ca.leaf(t, names)
	return c
}

func (ca *CA) leaf(t testing.TB, names []string) (tls.Certificate, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	ca.next++
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// WriteLeaf writes a server certificate for names to dir as PEM files
// (certificate, key), for a server that takes files.
func (ca *CA) WriteLeaf(t testing.TB, dir string, names ...string) (certFile, keyFile string) {
	t.Helper()
	c, keyPEM := ca.leaf(t, names)
	certFile, keyFile = filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
