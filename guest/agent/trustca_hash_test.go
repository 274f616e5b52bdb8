//go:build linux

package agent

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/internal/boxnet"
)

// The subject hash is OpenSSL's (checked against the openssl command).
func TestSubjectHash(t *testing.T) {
	ca, _, err := boxnet.NewCA("0123456789ab")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(f, []byte(ca), 0o644)
	out, err := exec.Command("openssl", "x509", "-hash", "-noout", "-in", f).Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	block, _ := pem.Decode([]byte(ca))
	cert, _ := x509.ParseCertificate(block.Bytes)
	h, err := subjectHash(cert)
	if err != nil || fmt.Sprintf("%08x", h) != strings.TrimSpace(string(out)) {
		t.Errorf("hash %08x, %v; openssl says %s", h, err, out)
	}
}
