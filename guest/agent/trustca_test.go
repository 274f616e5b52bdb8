//go:build linux

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/protocol"
)

func TestInstallTrustCA(t *testing.T) {
	root := t.TempDir()
	bundle := filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")
	certifi := filepath.Join(root, "usr/local/lib/python3.11/site-packages/certifi/cacert.pem")
	for _, p := range []string{bundle, certifi} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("SYSTEM ROOTS"), 0o644)
	}
	// An absolute symlink is resolved inside the root, never the agent's.
	os.Symlink("/etc/ssl/certs/ca-certificates.crt", filepath.Join(root, "etc/ssl/cert.pem"))
	one, _, _ := boxnet.NewCA("one")
	two, _, _ := boxnet.NewCA("two")
	for _, ca := range []string{one, two} {
		if err := installTrustCA(root, ca); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{bundle, certifi} {
		b, _ := os.ReadFile(p)
		if s := string(b); !strings.HasPrefix(s, "SYSTEM ROOTS\n") || strings.Contains(s, one) || strings.Count(s, two) != 1 {
			t.Errorf("%s: %q", p, s)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, protocol.TrustCAPath)); string(b) != two {
		t.Errorf("own file: %q", b)
	}
	links, _ := filepath.Glob(filepath.Join(root, "etc/ssl/certs/*.0"))
	if len(links) != 1 {
		t.Errorf("hash links: %v", links)
	}
	// No bundle at all: one is made.
	empty := t.TempDir()
	if err := installTrustCA(empty, one); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(empty, "etc/ssl/certs/ca-certificates.crt")); err != nil || !strings.Contains(string(b), one) {
		t.Errorf("made bundle: %q %v", b, err)
	}
}
