package boxlite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Secret is a credential the box uses without ever holding it (BoxLite's
// Secret): the box sees Placeholder (in its environment as
// BOXLITE_SECRET_<NAME>), and the host's network stack puts Value in its
// place in HTTPS requests to Hosts only, in the request line, headers and
// body. Hosts are names or *.wildcards, each optionally with ":port"
// (default 443); each is reachable on that port even when allow_net does
// not list it. The box trusts a CA of its own (made for it, its key kept on
// the host) for those hosts; the real servers are verified against the
// host's trust store (SSL_CERT_FILE, SSL_CERT_DIR). See docs/secrets.md.
type Secret struct {
	Name  string   `json:"name"`
	Value string   `json:"-"` // never in box.json or box info: see SecretsFile
	Hosts []string `json:"hosts"`
	// Placeholder is what the box sees; default "<BOXLITE_SECRET:NAME>".
	Placeholder string `json:"placeholder"`
}

// EnvKey is the environment variable the box finds the placeholder in:
// BOXLITE_SECRET_ and the name in upper case, other characters than
// letters, digits and '_' as '_'.
func (s Secret) EnvKey() string {
	var b strings.Builder
	b.WriteString("BOXLITE_SECRET_")
	for _, r := range s.Name {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// GetPlaceholder is the placeholder the box sees (BoxLite's get_placeholder).
func (s Secret) GetPlaceholder() string {
	if s.Placeholder != "" {
		return s.Placeholder
	}
	return "<BOXLITE_SECRET:" + s.Name + ">"
}

// WithSecrets gives the box secrets (see Secret). Default: none.
func WithSecrets(secrets ...Secret) BoxOption {
	return func(c *BoxConfig) error { c.Secrets = append(c.Secrets, secrets...); return nil }
}

// WithSecret is WithSecrets of one secret with the default placeholder.
func WithSecret(name, value string, hosts ...string) BoxOption {
	return WithSecrets(Secret{Name: name, Value: value, Hosts: hosts})
}

// nodeCAEnv names the box's CA for Node, which reads no system bundle.
const nodeCAEnv = "NODE_EXTRA_CA_CERTS"

// validateSecrets is validate's part for secrets: placeholders filled in,
// each placeholder put in the environment. Values are checked only at
// create (withValues): a box's record holds none.
func (c *BoxConfig) validateSecrets(bad func(string, ...any) error, withValues bool) error {
	if len(c.Secrets) == 0 {
		return nil
	}
	if len(c.Secrets) > abi.MaxSecrets {
		return bad("%d secrets, at most %d", len(c.Secrets), abi.MaxSecrets)
	}
	if c.Network.Mode == NetworkDisabled {
		return bad("secrets need a network (their values are put in on the way out), but the network is disabled")
	}
	names, phs := map[string]bool{}, map[string]bool{}
	for i := range c.Secrets {
		s := &c.Secrets[i]
		s.Placeholder = s.GetPlaceholder()
		switch {
		case s.Name == "" || len(s.Name) > abi.MaxSecretName || !validText(s.Name) || strings.ContainsAny(s.Name, " \t"):
			return bad("secret name %q: 1 to %d printable characters without spaces", s.Name, abi.MaxSecretName)
		case names[s.EnvKey()]:
			return bad("secret %q: another secret has the environment variable %s", s.Name, s.EnvKey())
		case len(s.Placeholder) < abi.MinSecretPlaceholder || len(s.Placeholder) > abi.MaxSecretPlaceholder ||
			strings.IndexFunc(s.Placeholder, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
			return bad("secret %q: placeholder %q: %d to %d printable ASCII characters without spaces", s.Name, s.Placeholder,
				abi.MinSecretPlaceholder, abi.MaxSecretPlaceholder)
		case phs[s.Placeholder]:
			return bad("secret %q: another secret has the placeholder %q", s.Name, s.Placeholder)
		case len(s.Hosts) == 0 || len(s.Hosts) > abi.MaxSecretHosts:
			return bad("secret %q: 1 to %d hosts, please (%d given)", s.Name, abi.MaxSecretHosts, len(s.Hosts))
		}
		names[s.EnvKey()], phs[s.Placeholder] = true, true
		for j, h := range s.Hosts {
			sh, err := netpolicy.ParseSecretHost(h)
			if err != nil {
				return bad("secret %q: %v", s.Name, err)
			}
			s.Hosts[j] = sh.String()
		}
		if withValues {
			switch {
			case s.Value == "" || len(s.Value) > abi.MaxSecretValueBytes:
				return bad("secret %q: a value of 1 to %d bytes, please", s.Name, abi.MaxSecretValueBytes)
			case strings.ContainsAny(s.Value, "\r\n\x00"):
				return bad("secret %q: the value has a line break or NUL (it may go into a header)", s.Name)
			case strings.Contains(s.Value, s.Placeholder):
				return bad("secret %q: the value contains the placeholder", s.Name)
			}
		}
		if v, ok := c.Env[s.EnvKey()]; ok && v != s.Placeholder {
			return bad("secret %q: env sets %s, which is the secret's placeholder variable", s.Name, s.EnvKey())
		}
	}
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	for _, s := range c.Secrets {
		c.Env[s.EnvKey()] = s.Placeholder
	}
	if _, ok := c.Env[nodeCAEnv]; !ok {
		c.Env[nodeCAEnv] = protocol.TrustCAPath
	}
	if n := len(netpolicy.WithGrants(c.Network.AllowNet, c.secretHosts())); n > netpolicy.MaxRules {
		return bad("allow_net with the secrets' hosts has %d entries, at most %d", n, netpolicy.MaxRules)
	}
	return nil
}

func (c *BoxConfig) secretHosts() []netpolicy.SecretHost {
	var out []netpolicy.SecretHost
	for _, s := range c.Secrets {
		for _, h := range s.Hosts {
			if sh, err := netpolicy.ParseSecretHost(h); err == nil {
				out = append(out, sh)
			}
		}
	}
	return out
}

// writeSecrets writes a new box's secrets file (shimapi.SecretsFile, 0600
// in its 0700 directory) with a CA of its own.
func writeSecrets(dir, boxID string, secrets []Secret) error {
	if len(secrets) == 0 {
		return nil
	}
	cert, key, err := boxnet.NewCA(boxID)
	if err != nil {
		return fmt.Errorf("secrets: the box's CA: %w", err)
	}
	f := shimapi.Secrets{CACertPEM: cert, CAKeyPEM: key}
	for _, s := range secrets {
		f.Secrets = append(f.Secrets, shimapi.Secret{Name: s.Name, Placeholder: s.Placeholder, Value: s.Value, Hosts: s.Hosts})
	}
	return writeJSON(filepath.Join(dir, shimapi.SecretsFile), f)
}

// copySecrets gives a box made from b (a clone, a fork) b's secrets and CA,
// which the copied disk trusts.
func (b *Box) copySecrets(stage string) error {
	if len(b.rec.Config.Secrets) == 0 {
		return nil
	}
	data, err := os.ReadFile(b.path(shimapi.SecretsFile))
	if err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "secrets of box %s: %v", b.rec.ID, err)
	}
	defer clear(data)
	return os.WriteFile(filepath.Join(stage, shimapi.SecretsFile), data, 0o600)
}
