package shimapi

// SecretsFile holds a box's secrets and its interception CA (Secrets),
// written 0600 by the runtime when the box is created, read by the shim at
// each start. It is the only place on the host's disk where the secrets'
// values are (see docs/SECURITY.md, "Secrets"); box.json and shim.json
// name the secrets and their hosts, never their values.
const SecretsFile = "secrets.json"

// Secret is one secret of a box: the box sees Placeholder where the host
// puts Value, in HTTPS requests to Hosts only.
type Secret struct {
	Name        string   `json:"name"`
	Placeholder string   `json:"placeholder"`
	Value       string   `json:"value"`
	Hosts       []string `json:"hosts"`
}

// Secrets is SecretsFile's content: the secrets, and the box's own CA (PEM)
// whose certificate the box trusts and whose key signs the certificates the
// network stack shows the box for the secrets' hosts. The key never enters
// the box.
type Secrets struct {
	Secrets   []Secret `json:"secrets"`
	CACertPEM string   `json:"ca_cert"`
	CAKeyPEM  string   `json:"ca_key"`
}

// MaxHostRoots bounds the host's trust store the shim hands the network
// stack (SSL_CERT_FILE and SSL_CERT_DIR's files, or the usual ones).
const MaxHostRoots = 4 << 20
