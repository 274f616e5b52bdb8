package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"

	"github.com/boxlite/boxlite/errdefs"
)

// The credentials file is BoxLite's: $BOXLITE_HOME/credentials.toml (else
// ~/.boxlite/credentials.toml), tables [profiles.NAME] with url and
// api_key, mode 0600 in a 0700 directory.
const (
	defaultProfile  = "default"
	maxCredentials  = 1 << 20
	credentialsName = "credentials.toml"
)

type profile struct {
	URL    string `toml:"url"`
	APIKey string `toml:"api_key,omitempty"`
}

type credentialsFile struct {
	Profiles map[string]profile `toml:"profiles"`
}

func credentialsPath() (string, error) {
	if h := os.Getenv("BOXLITE_HOME"); h != "" {
		return filepath.Join(h, credentialsName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "credentials: no home directory (%v): set BOXLITE_HOME", err)
	}
	return filepath.Join(home, ".boxlite", credentialsName), nil
}

// readCredentials reads the file; a missing one is empty. Malformed TOML is
// an error (never silently overwritten).
func readCredentials() (credentialsFile, string, error) {
	var cf credentialsFile
	path, err := credentialsPath()
	if err != nil {
		return cf, "", err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cf, path, nil
	}
	if err != nil {
		return cf, path, err
	}
	if len(data) > maxCredentials {
		return cf, path, errdefs.Errorf(errdefs.ErrLimit, "credentials file %s is larger than %d bytes", path, maxCredentials)
	}
	if _, err := toml.Decode(string(data), &cf); err != nil {
		// The parser's message quotes the line, which may be a key.
		return cf, path, errdefs.Errorf(errdefs.ErrInvalidArgument, "credentials file %s is not valid TOML", path)
	}
	return cf, path, nil
}

// loadProfile is the profile name; found is false when it is not saved.
func loadProfile(name string) (p profile, found bool, err error) {
	cf, _, err := readCredentials()
	if err != nil {
		return p, false, err
	}
	p, found = cf.Profiles[name]
	return p, found, nil
}

// saveProfile sets (or, p nil, removes) the profile name, keeping the
// others; removed reports one was there. The file is written to a
// temporary file of mode 0600 beside it and renamed over it, so it is
// never partly written nor readable by others.
func saveProfile(name string, p *profile) (removed bool, err error) {
	cf, path, err := readCredentials()
	if err != nil {
		return false, err
	}
	if cf.Profiles == nil {
		cf.Profiles = map[string]profile{}
	}
	_, removed = cf.Profiles[name]
	if p == nil {
		if !removed {
			return false, nil
		}
		delete(cf.Profiles, name)
	} else {
		cf.Profiles[name] = *p
	}
	if len(cf.Profiles) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		return removed, nil
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(cf); err != nil {
		return removed, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return removed, err
	}
	f, err := os.CreateTemp(dir, ".credentials-*.toml") // mode 0600
	if err != nil {
		return removed, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return removed, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return removed, err
	}
	if err := f.Close(); err != nil {
		return removed, err
	}
	return removed, os.Rename(f.Name(), path)
}
