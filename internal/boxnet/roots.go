package boxnet

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Where a Linux host keeps its trust store, as Go's crypto/x509 looks
// (the first file found; every directory).
var (
	rootFiles = []string{
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/ca-bundle.pem",
		"/etc/pki/tls/cacert.pem",
		"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
		"/etc/ssl/cert.pem",
	}
	rootDirs = []string{"/etc/ssl/certs", "/etc/pki/tls/certs"}
)

// HostRoots reads the host's trust store as PEM, as crypto/x509 would:
// SSL_CERT_FILE instead of the usual files, SSL_CERT_DIR (colon-separated)
// instead of the usual directories. At most max bytes.
func HostRoots(max int) ([]byte, error) {
	files := rootFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	dirs := rootDirs
	if d := os.Getenv("SSL_CERT_DIR"); d != "" {
		dirs = strings.Split(d, ":")
	}
	var out bytes.Buffer
	add := func(path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: not a file", path)
		}
		if _, err := io.Copy(&out, io.LimitReader(f, int64(max-out.Len()+1))); err != nil {
			return err
		}
		out.WriteByte('\n')
		if out.Len() > max {
			return fmt.Errorf("the host's trust store has more than %d bytes", max)
		}
		return nil
	}
	for _, f := range files {
		if err := add(f); err == nil {
			break
		} else if out.Len() > max {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			// The usual directory holds the bundle file too, and links
			// to the same certificates under other names.
			real, err := filepath.EvalSymlinks(p)
			if err != nil || seen[real] || (len(files) > 0 && real == evalOr(files[0])) {
				continue
			}
			seen[real] = true
			if err := add(p); err != nil && out.Len() > max {
				return nil, err
			}
		}
	}
	return out.Bytes(), nil
}

func evalOr(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
