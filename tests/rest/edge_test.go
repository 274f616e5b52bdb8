package rest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// operations are the served schema's (method, path) pairs, with path
// parameters filled in.
func operations(t *testing.T) (ops [][2]string, public map[string]bool) {
	t.Helper()
	status, body := call(t, "GET", "/v1/openapi.json", "", nil, "")
	if status != 200 {
		t.Fatalf("GET /v1/openapi.json: %d %s", status, body)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Security *[]any `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	public = map[string]bool{}
	r := strings.NewReplacer("{box_id}", "nosuchbox", "{exec_id}", "exec-0", "{snapshot_name}", "s1",
		"{image_id}", "sha256:"+strings.Repeat("0", 64), "{name}", "k", "{volume_id}", "v")
	for p, item := range doc.Paths {
		for m, op := range item {
			path := "/v1" + r.Replace(p)
			ops = append(ops, [2]string{strings.ToUpper(m), path})
			if op.Security != nil && len(*op.Security) == 0 {
				public[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	if len(ops) < 30 {
		t.Fatalf("the schema has %d operations", len(ops))
	}
	return ops, public
}

// TestEveryRouteNeedsAKey: without a key or with a wrong one, every
// operation but the public ones answers 401 and changes nothing.
func TestEveryRouteNeedsAKey(t *testing.T) {
	ops, public := operations(t)
	_, before := callJSON(t, "GET", "/v1/boxes", nil)
	for _, tok := range []string{"", "bxl_wrong", key + "x", strings.ToUpper(key)} {
		for _, op := range ops {
			status, body := call(t, op[0], op[1], tok, strings.NewReader(`{"name":"intruder"}`), "application/json")
			if public[op[0]+" "+op[1]] {
				if status == 401 {
					t.Errorf("%s %s is public, answered 401", op[0], op[1])
				}
				continue
			}
			if status != 401 {
				t.Errorf("%s %s with token %q: %d %s, want 401", op[0], op[1], tok, status, body)
			} else if op[0] != "HEAD" && errorCode(t, body) != "unauthenticated" {
				t.Errorf("%s %s: code %s", op[0], op[1], errorCode(t, body))
			}
		}
	}
	if status, _ := call(t, "GET", "/metrics", "", nil, ""); status != 401 {
		t.Errorf("/metrics without a key: %d", status)
	}
	if status, _ := call(t, "GET", "/healthz", "", nil, ""); status != 200 {
		t.Errorf("/healthz: %d", status)
	}
	_, after := callJSON(t, "GET", "/v1/boxes", nil)
	if !bytes.Equal(before, after) {
		t.Errorf("unauthenticated requests changed the boxes:\n%s\n%s", before, after)
	}
}

// TestKeyLifecycle: a key made while the server runs works at once; one
// removed is refused from its next request; the file keeps only hashes.
func TestKeyLifecycle(t *testing.T) {
	out, err := boxliteCmd(nil, "serve", "key", "create", "--keys", keys, "--name", "short-lived")
	if err != nil {
		t.Fatal(err)
	}
	k := strings.TrimSpace(out)
	if status, body := call(t, "GET", "/v1/me", k, nil, ""); status != 200 || !strings.Contains(string(body), `"sub":"short-lived"`) {
		t.Fatalf("GET /v1/me with the new key: %d %s", status, body)
	}
	data, err := os.ReadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), k) || strings.Contains(string(data), strings.TrimPrefix(k, "bxl_")) {
		t.Fatal("the key file holds a key itself")
	}
	if st, _ := os.Stat(keys); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode().Perm())
	}
	if out, err := boxliteCmd(nil, "serve", "key", "ls", "--keys", keys); err != nil || !strings.Contains(out, "short-lived") {
		t.Fatalf("key ls: %v %s", err, out)
	}
	if _, err := boxliteCmd(nil, "serve", "key", "create", "--keys", keys, "--name", "short-lived"); err == nil {
		t.Fatal("a second key of one name was made")
	}
	if _, err := boxliteCmd(nil, "serve", "key", "rm", "--keys", keys, "short-lived"); err != nil {
		t.Fatal(err)
	}
	if status, _ := call(t, "GET", "/v1/me", k, nil, ""); status != 401 {
		t.Fatalf("a removed key: %d, want 401", status)
	}
}

// TestTunnelOfARemovedKey: a tunnel descriptor made with a key that was
// removed since carries nothing (its CONNECT is refused before any box is
// reached).
func TestTunnelOfARemovedKey(t *testing.T) {
	out, err := boxliteCmd(nil, "serve", "key", "create", "--keys", keys, "--name", "tunnel-key")
	if err != nil {
		t.Fatal(err)
	}
	k := strings.TrimSpace(out)
	if status, body := call(t, "POST", "/v1/boxes", k, strings.NewReader(`{"name":"tunnel-key-box","memory_mib":256}`), "application/json"); status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	defer call(t, "DELETE", "/v1/boxes/tunnel-key-box?force=true", key, nil, "")
	status, body := call(t, "POST", "/v1/boxes/tunnel-key-box/network/tunnel?port=80", k, nil, "")
	var d struct{ URI string }
	if err := json.Unmarshal(body, &d); err != nil || status != 200 {
		t.Fatalf("descriptor: %d %s", status, body)
	}
	if _, err := boxliteCmd(nil, "serve", "key", "rm", "--keys", keys, "tunnel-key"); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(d.URI)
	conn, err := net.DialTimeout("tcp", u.Host, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s@%s HTTP/1.1\r\nHost: %s@%s\r\n\r\n", u.User.Username(), u.Host, u.User.Username(), u.Host)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(msg), "removed") {
		t.Errorf("CONNECT with a removed key's tunnel: %d %q, want 403", resp.StatusCode, msg)
	}
}

// TestListenPolicy: beyond loopback without TLS the server refuses to
// start; with TLS it serves (and a key still decides).
func TestListenPolicy(t *testing.T) {
	cmd := exec.Command(filepath.Join(repo, "build", "boxlite"), "serve", "--listen", "0.0.0.0:0", "--keys", keys)
	cmd.Env = append(os.Environ(), "BOXLITE_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-cert") {
		t.Fatalf("serve --listen 0.0.0.0:0 without TLS: %v %s", err, out)
	}
	for _, bad := range [][]string{{"--tls-cert", "x.pem"}, {"--listen", "nonsense"}, {"--bogus"}} {
		cmd := exec.Command(filepath.Join(repo, "build", "boxlite"), append([]string{"serve", "--keys", keys}, bad...)...)
		cmd.Env = append(os.Environ(), "BOXLITE_HOME="+home)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("serve %q started: %s", bad, out)
		}
	}

	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	tlsSrv, err := startServer("--tls-cert", certFile, "--tls-key", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer tlsSrv.stop()
	if !strings.HasPrefix(tlsSrv.url, "https://") {
		t.Fatalf("TLS server at %s", tlsSrv.url)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for tok, want := range map[string]int{"": 401, key: 200} {
		req, _ := http.NewRequest("GET", tlsSrv.url+"/v1/me", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("TLS GET /v1/me (key %v): %d, want %d", tok != "", resp.StatusCode, want)
		}
	}
	tlsTunnel(t, tlsSrv, c, &tls.Config{RootCAs: pool})
}

// tlsTunnel: a TLS server's tunnel descriptor is https, its CONNECT
// listener speaks TLS with the API's certificate and refuses a revoked or
// forged token (a box made, never started).
func tlsTunnel(t *testing.T, s *server, c *http.Client, tlsCfg *tls.Config) {
	do := func(method, path string, body io.Reader) *http.Response {
		req, _ := http.NewRequest(method, s.url+path, body)
		req.Header.Set("Authorization", "Bearer "+key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do("POST", "/v1/boxes", strings.NewReader(`{"image":"alpine:latest","name":"tls-tunnel","memory_mib":256}`))
	if raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create on a TLS server: %s %s", resp.Status, raw)
	}
	resp.Body.Close()
	defer func() { do("DELETE", "/v1/boxes/tls-tunnel?force=true", nil).Body.Close() }()
	resp = do("POST", "/v1/boxes/tls-tunnel/network/tunnel?port=8000", nil)
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	var d struct{ URI string }
	if err := json.Unmarshal(raw, &d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST .../network/tunnel on a TLS server: %s %s", resp.Status, raw)
	}
	u, err := url.Parse(d.URI)
	if err != nil || u.Scheme != "https" || u.User == nil || !strings.HasPrefix(u.User.Username(), "bxt_") {
		t.Fatalf("descriptor of a TLS server: %q %v", d.URI, err)
	}
	do("DELETE", "/v1/boxes/tls-tunnel/network/tunnel?port=8000", nil).Body.Close()
	for _, tok := range []string{u.User.Username(), "bxt_forged"} {
		conn, err := tls.Dial("tcp", u.Host, tlsCfg)
		if err != nil {
			t.Fatalf("TLS to the tunnel listener: %v", err)
		}
		fmt.Fprintf(conn, "CONNECT %s@%s HTTP/1.1\r\nHost: %s@%s\r\n\r\n", tok, u.Host, tok, u.Host)
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if !strings.HasPrefix(line, "HTTP/1.1 403") {
			t.Errorf("CONNECT with a revoked or forged token over TLS: %q, want 403", line)
		}
	}
}

func selfSigned(t *testing.T, dir string) (string, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(priv)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// TestBounds: a body over the bound is 413, an unknown field or query
// parameter 400, a header flood 431, all in BoxLite's error body.
func TestBounds(t *testing.T) {
	big := `{"name":"` + strings.Repeat("a", 2<<20) + `"}`
	if status, body := call(t, "POST", "/v1/boxes", key, strings.NewReader(big), "application/json"); status != 413 {
		t.Errorf("2 MiB JSON body: %d %.200s", status, body)
	}
	status, body := callJSON(t, "POST", "/v1/boxes", map[string]any{"image": "alpine:latest", "colour": "blue"})
	if status != 400 || errorCode(t, body) != "invalid_argument" || !strings.Contains(string(body), "colour") {
		t.Errorf("unknown field: %d %s", status, body)
	}
	status, body = callJSON(t, "GET", "/v1/boxes?sort=name", nil)
	if status != 400 || !strings.Contains(string(body), "sort") {
		t.Errorf("unknown query parameter: %d %s", status, body)
	}
	for _, bad := range []string{"../etc", "a/b", ".hidden", strings.Repeat("x", 200)} {
		status, body := call(t, "GET", "/v1/boxes/"+strings.ReplaceAll(bad, "/", "%2F"), key, nil, "")
		if status != 400 && status != 404 {
			t.Errorf("box id %q: %d %s", bad, status, body)
		}
	}
	req, _ := http.NewRequest("GET", srv.url+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Flood", strings.Repeat("f", 128<<10))
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 431 {
		t.Errorf("128 KiB header: %d", resp.StatusCode)
	}
	status, body = callJSON(t, "POST", "/v1/boxes", map[string]any{"image": "alpine:latest", "volumes": []any{map[string]any{"managed_volume": "v", "guest_path": "/d"}}})
	if status != 501 || errorCode(t, body) != "unsupported" {
		t.Errorf("managed volumes: %d %s", status, body)
	}
	status, body = callJSON(t, "POST", "/v1/boxes", map[string]any{"rootfs_path": "/etc"})
	if status != 400 {
		t.Errorf("rootfs_path: %d %s", status, body)
	}
}
