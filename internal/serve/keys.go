package serve

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi"
)

// A key file holds one key a line: "NAME SHA256-HEX CREATED-RFC3339". The
// key itself is shown once, when made, and never stored: a random 32 bytes,
// "bxl_" and base64url. Random keys need no slow hash; comparing hashes in
// constant time, against every key, keeps the timing from telling which
// prefix matched.

// KeyPrefix starts every key.
const KeyPrefix = "bxl_"

// Key is one line of a key file.
type Key struct {
	Name    string
	Hash    [sha256.Size]byte
	Created time.Time
}

var keyName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)

// ReadKeys reads a key file. A missing file has no keys.
func ReadKeys(path string) ([]Key, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []Key
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 || !keyName.MatchString(fs[0]) {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s:%d: want NAME SHA256-HEX CREATED", path, n)
		}
		h, err := hex.DecodeString(fs[1])
		if err != nil || len(h) != sha256.Size {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s:%d: the hash is not 64 hex digits", path, n)
		}
		t, err := time.Parse(time.RFC3339, fs[2])
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s:%d: created: %v", path, n, err)
		}
		k := Key{Name: fs[0], Created: t}
		copy(k.Hash[:], h)
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

func writeKeys(path string, keys []Key) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# boxlite serve keys: NAME SHA256-OF-KEY CREATED (the keys themselves are not kept)\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %x %s\n", k.Name, k.Hash, k.Created.UTC().Format(time.RFC3339))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// CreateKey adds a key named name (default key-N) to the file and returns
// its value, which is not kept.
func CreateKey(path, name string) (string, Key, error) {
	keys, err := ReadKeys(path)
	if err != nil {
		return "", Key{}, err
	}
	if name == "" {
		name = fmt.Sprintf("key-%d", len(keys)+1)
	}
	if !keyName.MatchString(name) {
		return "", Key{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "key name %q: want 1-64 letters, digits, '.', '_' or '-'", name)
	}
	for _, k := range keys {
		if k.Name == name {
			return "", Key{}, errdefs.Errorf(errdefs.ErrAlreadyExists, "a key named %q exists in %s", name, path)
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Key{}, err
	}
	value := KeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	k := Key{Name: name, Hash: sha256.Sum256([]byte(value)), Created: time.Now().UTC().Truncate(time.Second)}
	if err := writeKeys(path, append(keys, k)); err != nil {
		return "", Key{}, err
	}
	return value, k, nil
}

// RemoveKey removes the key named name; a running server refuses it from
// its next request.
func RemoveKey(path, name string) error {
	keys, err := ReadKeys(path)
	if err != nil {
		return err
	}
	out := keys[:0]
	for _, k := range keys {
		if k.Name != name {
			out = append(out, k)
		}
	}
	if len(out) == len(keys) {
		return errdefs.Errorf(errdefs.ErrNotFound, "no key named %q in %s", name, path)
	}
	return writeKeys(path, out)
}

// keyring authenticates requests against a key file, read again whenever
// it changes.
type keyring struct {
	path string
	mu   sync.Mutex
	keys []Key
	seen os.FileInfo
}

func newKeyring(path string) (*keyring, error) {
	k := &keyring{path: path}
	if err := k.reload(); err != nil {
		return nil, err
	}
	if len(k.keys) == 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "no keys in %s: make one with `boxlite serve key create --keys %s`", path, path)
	}
	return k, nil
}

func (k *keyring) reload() error {
	st, err := os.Stat(k.path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if st != nil && k.seen != nil && st.ModTime().Equal(k.seen.ModTime()) && st.Size() == k.seen.Size() && os.SameFile(st, k.seen) {
		return nil
	}
	keys, err := ReadKeys(k.path)
	if err != nil {
		return err
	}
	k.keys, k.seen = keys, st
	return nil
}

// Authenticate names the key of a request's "Authorization: Bearer".
func (k *keyring) Authenticate(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", restapi.Unauthenticated("invalid or missing API key: send Authorization: Bearer <key>")
	}
	return k.AuthenticateKey(token)
}

// AuthenticateKey names the key whose value is token (E2B's X-API-Key).
func (k *keyring) AuthenticateKey(token string) (string, error) {
	if strings.TrimSpace(token) == "" {
		return "", restapi.Unauthenticated("invalid or missing API key")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	k.mu.Lock()
	err := k.reload()
	keys := k.keys
	k.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("reading the key file: %w", err)
	}
	name := ""
	for _, key := range keys {
		if subtle.ConstantTimeCompare(sum[:], key.Hash[:]) == 1 {
			name = key.Name
		}
	}
	if name == "" {
		return "", restapi.Unauthenticated("invalid or missing API key")
	}
	return name, nil
}

// HasKey says whether a key of that name is in the key file now (a tunnel
// made with a key that was removed since carries nothing more).
func (k *keyring) HasKey(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.reload() != nil {
		return false
	}
	for _, key := range k.keys {
		if key.Name == name {
			return true
		}
	}
	return false
}
