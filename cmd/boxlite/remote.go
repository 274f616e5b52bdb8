package main

import (
	"os"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/backend"
)

// The global options, before the command: --url URL and --profile NAME
// make the command run on a `boxlite serve` rather than on this machine.
// A command runs remotely when --url, $BOXLITE_REST_URL or --profile is
// given, and only then (a saved profile alone does not send a plain
// `boxlite ls` to a server). Its key is $BOXLITE_API_KEY, else the
// profile's: --profile's, or the "default" profile's when that profile is
// for the same url (a key is never sent to a server it was not saved for).
var global struct {
	url, profile string
}

// remoteCommands run over --url; every other command given it fails
// (notOverURL), never running on this machine instead.
var remoteCommands = map[string]bool{
	"ls": true, "ps": true, "info": true, "inspect": true, "create": true, "start": true, "stop": true,
	"restart": true, "rm": true, "exec": true, "run": true, "cp": true, "pull": true, "image": true,
	"auth": true, "help": true, "-h": true, "--help": true,
}

// parseGlobal reads the global options off the front of args.
func parseGlobal(args []string) ([]string, error) {
	for len(args) > 0 {
		name, value, hasValue := strings.Cut(args[0], "=")
		var dst *string
		switch name {
		case "--url", "-url":
			dst = &global.url
		case "--profile", "-profile":
			dst = &global.profile
		default:
			return args, nil
		}
		args = args[1:]
		if !hasValue {
			if len(args) == 0 {
				return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s needs a value", name)
			}
			value, args = args[0], args[1:]
		}
		if value == "" {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s is empty", name)
		}
		*dst = value
	}
	return args, nil
}

// remote reports whether commands run on a server.
func remote() bool {
	return global.url != "" || global.profile != "" || os.Getenv("BOXLITE_REST_URL") != ""
}

// notOverURL is the error of a command that runs only on the boxes' host.
func notOverURL(what string) error {
	return errdefs.Errorf(errdefs.ErrUnsupported, "%s is not available over --url: run it on the server's host", what)
}

// restOptions are the server and key the global options, the environment
// and the credentials file name.
func restOptions() (abi.RestOptions, error) {
	url := global.url
	if url == "" {
		url = os.Getenv("BOXLITE_REST_URL")
	}
	name := global.profile
	if name == "" {
		name = defaultProfile
	}
	p, found, err := loadProfile(name)
	if err != nil {
		return abi.RestOptions{}, err
	}
	if global.profile != "" && !found {
		return abi.RestOptions{}, errdefs.Errorf(errdefs.ErrNotFound, "no profile %q (boxlite auth login --profile %s --url URL)", name, name)
	}
	if url == "" {
		url = p.URL
	}
	key := os.Getenv("BOXLITE_API_KEY")
	if key == "" && found && (global.profile != "" || sameURL(p.URL, url)) {
		key = p.APIKey
	}
	if key == "" {
		return abi.RestOptions{}, errdefs.Errorf(errdefs.ErrInvalidArgument,
			"no API key for %s: set BOXLITE_API_KEY, or save one with boxlite auth login --url %s", url, url)
	}
	return abi.RestOptions{URL: url, APIKey: key}, nil
}

func sameURL(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// openRuntime opens the runtime commands run on: a server's (remote()),
// else this machine's, returned as local too.
func openRuntime() (rt backend.Runtime, local *boxlite.Runtime, err error) {
	if remote() {
		o, err := restOptions()
		if err != nil {
			return nil, nil, err
		}
		rt, err := backend.REST(o)
		return rt, nil, err
	}
	local, err = boxlite.NewRuntime()
	if err != nil {
		return nil, nil, err
	}
	return backend.Local(local), local, nil
}
