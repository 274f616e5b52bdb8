package containerd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCNIConfig gives the test's containerd a CNI network of its own:
// Debian's containernetworking-plugins, a bridge (named and numbered for
// this run, so that other runs on the machine do not collide) with
// host-local addresses, IPv4 and IPv6 (dual stack), the bridge the pods'
// gateway.
func writeCNIConfig() error {
	pid := os.Getpid()
	env.bridge = fmt.Sprintf("bxl%d", pid%100000)
	env.subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + pid%50), byte(pid / 50 % 250), 0}), 24)
	env.subnet6 = netip.MustParsePrefix(fmt.Sprintf("fd00:b0c5:%x::/64", pid%0x10000))
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "boxlite-test",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}], [{"subnet": %q}]], "dataDir": %q,
      "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}
  }]
}`, env.bridge, env.subnet.String(), env.subnet6.String(), filepath.Join(env.dir, "cni-ipam"))
	if err := os.MkdirAll(filepath.Join(env.dir, "cni"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.dir, "cni", "10-boxlite-test.conflist"), []byte(conf), 0o644); err != nil {
		return err
	}
	// A second network (containerd's max_conf_num = 2: the pod's eth1, as
	// a secondary network without multus), on a bridge of its own,
	// without a default route.
	env.bridge2 = fmt.Sprintf("bxm%d", pid%100000)
	env.subnet2 = netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + pid%16), byte(pid / 16 % 250), 0}), 24)
	conf2 := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "boxlite-second",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "subnet": %q, "dataDir": %q}
  }]
}`, env.bridge2, env.subnet2.String(), filepath.Join(env.dir, "cni-ipam2"))
	return os.WriteFile(filepath.Join(env.dir, "cni", "20-boxlite-second.conflist"), []byte(conf2), 0o644)
}

// TestCRIPodNetwork runs a pod on a CNI network (a network namespace of
// its own, as the kubelet's pods have): the box takes the namespace's
// interfaces (a tap there for each, tc redirects), so the container has
// the pod's addresses (IPv4 and IPv6 on eth0, a second network's on eth1),
// reaches its gateways, and the host reaches a server in it at each.
func TestCRIPodNetwork(t *testing.T) {
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Fatalf("Debian's containernetworking-plugins are not installed (`make setup`): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pauseImage(t, ctx)
	dir := t.TempDir()
	podCfg := writeJSON(t, filepath.Join(dir, "pod.json"), map[string]any{
		"metadata":      map[string]any{"name": "pn", "namespace": "default", "uid": "uid-pn", "attempt": 0},
		"hostname":      "pn",
		"log_directory": filepath.Join(dir, "logs"),
	})
	start := time.Now()
	r, err := crictl(ctx, "runp", "--runtime", "boxlite", podCfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.TrimSpace(r.stdout)
	defer crictl(context.Background(), "rmp", "-f", pod) //nolint:errcheck
	t.Logf("runp on the CNI network: %.1f s", time.Since(start).Seconds())
	r, err = crictl(ctx, "inspectp", "-o", "go-template", "--template", "{{.status.network.ip}}", pod)
	ip, perr := netip.ParseAddr(strings.TrimSpace(r.stdout))
	if err != nil || perr != nil || !env.subnet.Contains(ip) {
		t.Fatalf("pod address %q (%v %v), want one of %s", r.stdout, err, perr, env.subnet)
	}
	r, err = crictl(ctx, "inspectp", "-o", "go-template", "--template", "{{range .status.network.additionalIps}}{{.ip}}{{end}}", pod)
	ip6, perr := netip.ParseAddr(strings.TrimSpace(r.stdout))
	if err != nil || perr != nil || !env.subnet6.Contains(ip6) {
		t.Fatalf("pod IPv6 address %q (%v %v), want one of %s", r.stdout, err, perr, env.subnet6)
	}
	gw, gw6 := env.subnet.Addr().Next(), env.subnet6.Addr().Next()
	cfg := writeJSON(t, filepath.Join(dir, "c.json"), map[string]any{
		"metadata": map[string]any{"name": "srv"},
		"image":    map[string]any{"image": "docker.io/library/alpine:latest"},
		"command":  []string{"sh", "-c", "while :; do echo hello-from-the-pod | nc -l -p 8080; done"},
		"log_path": "srv.log",
	})
	r, err = crictl(ctx, "create", pod, cfg, podCfg)
	if err != nil {
		t.Fatal(err)
	}
	c := strings.TrimSpace(r.stdout)
	if _, err := crictl(ctx, "start", c); err != nil {
		t.Fatal(err)
	}
	gw2 := env.subnet2.Addr().Next()
	r, err = crictl(ctx, "exec", "-s", c, "sh", "-c", "ip -o addr show eth0; ping -c 1 -W 10 "+gw.String()+" >/dev/null && echo gateway-ok; "+
		"ping -c 1 -W 10 "+gw6.String()+" >/dev/null && echo gateway6-ok; ping -c 1 -W 10 "+gw2.String()+" >/dev/null && echo second-ok; "+
		"ip -4 -o addr show eth1")
	if err != nil || !strings.Contains(r.stdout, " "+ip.String()+"/") || !strings.Contains(r.stdout, " "+ip6.String()+"/64") ||
		!strings.Contains(r.stdout, "gateway-ok") || !strings.Contains(r.stdout, "gateway6-ok") || !strings.Contains(r.stdout, "second-ok") {
		t.Fatalf("in the pod: %q %v, want %s and %s, and the gateways %s, %s and %s (the second network's)", r.stdout, err, ip, ip6, gw, gw6, gw2)
	}
	// The second network's address, as the box's eth1 has it.
	var ip2 netip.Addr
	for _, f := range strings.Fields(r.stdout[max(strings.Index(r.stdout, "eth1"), 0):]) {
		if p, err := netip.ParsePrefix(f); err == nil && env.subnet2.Contains(p.Addr()) {
			ip2 = p.Addr()
		}
	}
	if !ip2.IsValid() {
		t.Fatalf("in the pod: %q: no address of the second network %s on eth1", r.stdout, env.subnet2)
	}
	t.Logf("in the pod: %s", strings.TrimSpace(r.stdout))
	// The host reaches the pod's server at the pod's addresses.
	for _, addr := range []netip.Addr{ip, ip6, ip2} {
		var got string
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(addr, 8080).String(), 5*time.Second)
			if err == nil {
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				b, _ := io.ReadAll(conn)
				conn.Close()
				if got = string(b); strings.Contains(got, "hello-from-the-pod") {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the host did not reach the pod's server at %s within 60 s: %q %v", netip.AddrPortFrom(addr, 8080), got, err)
			}
		}
		t.Logf("the host read %q from %s", strings.TrimSpace(got), netip.AddrPortFrom(addr, 8080))
	}
	if _, err := crictl(ctx, "rmp", "-f", pod); err != nil {
		t.Fatal(err)
	}
	awaitNothingLeft(t, 60*time.Second)
}
