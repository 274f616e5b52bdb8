//go:build linux

package agent

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
)

// The trust stores a box's CA for secrets goes into (protocol.Identity's
// TrustCA): the system bundles of the usual distributions (where the image
// has one; Debian's when it has none), Python's certifi bundles (requests
// and pip read those, not the system's), and a file of its own at
// protocol.TrustCAPath, which NODE_EXTRA_CA_CERTS names for Node and which
// update-ca-certificates keeps when it rebuilds the bundle.
var (
	systemBundles = []string{
		"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
		"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
		"/etc/ssl/cert.pem",                  // Alpine, macOS-style
		"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
		"/etc/ssl/ca-bundle.pem", // openSUSE
	}
	certifiGlobs = []string{
		"/usr/lib/python3*/site-packages/certifi/cacert.pem",
		"/usr/local/lib/python3*/site-packages/certifi/cacert.pem",
		"/usr/lib/python3/dist-packages/certifi/cacert.pem",
		"/usr/lib/python3*/site-packages/pip/_vendor/certifi/cacert.pem",
		"/usr/local/lib/python3*/site-packages/pip/_vendor/certifi/cacert.pem",
		"/usr/lib/python3/dist-packages/pip/_vendor/certifi/cacert.pem",
	}
)

const (
	trustBegin = "# boxlite secrets CA (added by the box's agent; replaced at each start)\n"
	trustEnd   = "# end of boxlite secrets CA\n"
	// maxBundle bounds a trust bundle the agent rewrites.
	maxBundle = 16 << 20
)

// installTrustCA adds the PEM certificate ca to the box's trust stores
// under root, replacing the one an earlier start added.
func installTrustCA(root, ca string) error {
	if err := writeBoxFile(root, protocol.TrustCAPath, []byte(ca)); err != nil {
		return fmt.Errorf("trust CA: %s: %w", protocol.TrustCAPath, err)
	}
	if err := linkHashed(root, ca); err != nil {
		return fmt.Errorf("trust CA: /etc/ssl/certs: %w", err)
	}
	seen := map[string]bool{}
	system := 0
	patchAll := func(paths []string, isSystem bool) error {
		for _, p := range paths {
			hp, err := resolveIn(root, p)
			if err != nil || seen[hp] {
				continue
			}
			seen[hp] = true
			if err := patchBundle(hp, ca); err != nil {
				return fmt.Errorf("trust CA: %s: %w", p, err)
			}
			if isSystem {
				system++
			}
		}
		return nil
	}
	if err := patchAll(systemBundles, true); err != nil {
		return err
	}
	var certifi []string
	for _, g := range certifiGlobs {
		matches, _ := filepath.Glob(filepath.Join(root, g))
		for _, m := range matches {
			if rel, err := filepath.Rel(root, m); err == nil && !strings.HasPrefix(rel, "..") {
				certifi = append(certifi, "/"+rel)
			}
		}
	}
	if err := patchAll(certifi, false); err != nil {
		return err
	}
	if system == 0 {
		// An image without CA certificates: a bundle of the box's CA
		// alone where OpenSSL (Debian's build) and Go look first.
		if err := writeBoxFile(root, systemBundles[0], []byte(trustBegin+ca+trustEnd)); err != nil {
			return fmt.Errorf("trust CA: %s: %w", systemBundles[0], err)
		}
	}
	return nil
}

// patchBundle rewrites the bundle at host path hp with ca's block at its
// end (an earlier block removed), through a file renamed over it.
func patchBundle(hp, ca string) error {
	f, err := os.OpenFile(hp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBundle+1))
	f.Close()
	if err != nil {
		return err
	}
	if len(b) > maxBundle {
		return fmt.Errorf("more than %d bytes", maxBundle)
	}
	if i := bytes.Index(b, []byte(trustBegin)); i >= 0 {
		rest := b[i:]
		if j := bytes.Index(rest, []byte(trustEnd)); j >= 0 {
			b = append(append([]byte(nil), b[:i]...), rest[j+len(trustEnd):]...)
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, trustBegin+ca+trustEnd...)
	return replaceFile(hp, b, fi.Mode().Perm())
}

// writeBoxFile writes box path p under root, making its directories.
func writeBoxFile(root, p string, b []byte) error {
	dir, err := boxFile(root, path.Dir(p), true)
	if err != nil {
		return err
	}
	return replaceFile(filepath.Join(dir, path.Base(p)), b, 0o644)
}

func replaceFile(hp string, b []byte, mode os.FileMode) error {
	tmp := hp + ".boxlite-tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, hp)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// linkHashed makes the link OpenSSL's directory lookup finds ca by
// (<subject hash>.N in /etc/ssl/certs, as c_rehash does): Debian's OpenSSL,
// Python's ssl module among its users, reads that directory, not a bundle.
func linkHashed(root, ca string) error {
	block, _ := pem.Decode([]byte(ca))
	if block == nil {
		return fmt.Errorf("not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	h, err := subjectHash(cert)
	if err != nil {
		return err
	}
	dir, err := boxFile(root, "/etc/ssl/certs", true)
	if err != nil {
		return err
	}
	// An earlier CA's link goes (a box keeps its CA, but a clone's may
	// differ from the one its disk was made with).
	if old, _ := filepath.Glob(filepath.Join(dir, "????????.?")); len(old) <= 4096 {
		for _, p := range old {
			if t, err := os.Readlink(p); err == nil && t == protocol.TrustCAPath && !strings.HasPrefix(filepath.Base(p), fmt.Sprintf("%08x.", h)) {
				os.Remove(p)
			}
		}
	}
	for i := 0; i < 10; i++ {
		p := filepath.Join(dir, fmt.Sprintf("%08x.%d", h, i))
		if t, err := os.Readlink(p); err == nil && t == protocol.TrustCAPath {
			return nil
		}
		if _, err := os.Lstat(p); err == nil {
			continue // another certificate of the same subject hash
		}
		return os.Symlink(protocol.TrustCAPath, p)
	}
	return nil
}

// subjectHash is OpenSSL's X509_NAME_hash of cert's subject: the first four
// bytes (little-endian) of the SHA-1 of its canonical encoding, the RDNs'
// SETs with every string value as a UTF8String in lower case, whitespace
// trimmed and collapsed, without the outer SEQUENCE.
func subjectHash(cert *x509.Certificate) (uint32, error) {
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil {
		return 0, err
	}
	var enc []byte
	for _, rdn := range rdns {
		set := make([]pkix.AttributeTypeAndValue, len(rdn))
		for i, atv := range rdn {
			set[i] = atv
			if s, ok := atv.Value.(string); ok {
				s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
				set[i].Value = asn1.RawValue{Tag: asn1.TagUTF8String, Class: asn1.ClassUniversal, Bytes: []byte(s)}
			}
		}
		b, err := asn1.MarshalWithParams(set, "set")
		if err != nil {
			return 0, err
		}
		enc = append(enc, b...)
	}
	sum := sha1.Sum(enc)
	return binary.LittleEndian.Uint32(sum[:4]), nil
}
