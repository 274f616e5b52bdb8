package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/backend"
	"github.com/boxlite/boxlite/internal/safetext"
)

// defaultServeURL is where `boxlite serve` listens by default.
const defaultServeURL = "http://127.0.0.1:8100"

// authTimeout bounds the one call that checks a key.
const authTimeout = 30 * time.Second

// cmdAuth saves, removes and shows the server profiles of the credentials
// file (credentials.go), as BoxLite's `boxlite auth` does.
func cmdAuth(args []string) error {
	if _, err := subcommand("auth", args, "login", "logout", "status"); err != nil {
		return err
	}
	cmd := "auth " + args[0]
	fs := newFlags(cmd)
	name := fs.String("profile", global.profile, "the `PROFILE` (default \"default\")")
	var url *string
	var keyStdin *bool
	if args[0] == "login" {
		url = fs.String("url", global.url, "the server `URL` (default $BOXLITE_REST_URL, else "+defaultServeURL+")")
		keyStdin = fs.Bool("api-key-stdin", false, "read the key from stdin (one line), not a prompt")
	}
	pos, err := parseArgs(fs, args[1:], true)
	if err == nil {
		err = noArgs(cmd, pos)
	}
	if err != nil {
		return err
	}
	if *name == "" {
		*name = defaultProfile
	}
	switch args[0] {
	case "login":
		return authLogin(*name, *url, *keyStdin)
	case "logout":
		removed, err := saveProfile(*name, nil)
		if err != nil {
			return err
		}
		if removed {
			fmt.Printf("Logged out: profile %s removed\n", *name)
		} else {
			fmt.Printf("Not logged in: no profile %s\n", *name)
		}
		return nil
	case "status":
		p, found, err := loadProfile(*name)
		if err != nil {
			return err
		}
		if !found {
			return errdefs.Errorf(errdefs.ErrNotFound, "not logged in: no profile %s (boxlite auth login --profile %s)", *name, *name)
		}
		fmt.Printf("Profile: %s\nURL: %s\n", *name, safetext.Line(p.URL))
		sub, err := checkKey(abi.RestOptions{URL: p.URL, APIKey: p.APIKey})
		if err != nil {
			return err
		}
		fmt.Printf("Key: %s (accepted)\n", safetext.Line(sub))
		return nil
	}
	return nil
}

// authLogin reads a key, checks it with one authenticated call and only
// then saves it.
func authLogin(name, url string, keyStdin bool) error {
	tty := isTerminal(0)
	if url == "" {
		url = os.Getenv("BOXLITE_REST_URL")
	}
	in := bufio.NewReader(io.LimitReader(os.Stdin, 64<<10))
	if url == "" && !keyStdin && tty {
		fmt.Fprintf(os.Stderr, "Server URL [%s]: ", defaultServeURL)
		line, err := readLine(in)
		if err != nil {
			return err
		}
		url = line
	}
	if url == "" {
		url = defaultServeURL
	}
	var key string
	var err error
	switch {
	case keyStdin:
		key, err = readLine(in)
	case tty:
		key, err = promptSecret(in, "API key: ")
	default:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "auth login: stdin is not a terminal: pass the key with --api-key-stdin")
	}
	if err != nil {
		return err
	}
	if key == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "auth login: the API key is empty")
	}
	sub, err := checkKey(abi.RestOptions{URL: url, APIKey: key})
	if err != nil {
		return fmt.Errorf("auth login: %s refused or did not answer; nothing saved: %w", safetext.Line(url), err)
	}
	if _, err := saveProfile(name, &profile{URL: url, APIKey: key}); err != nil {
		return err
	}
	fmt.Printf("Logged in to %s as %s (profile %s)\n", safetext.Line(url), safetext.Line(sub), name)
	return nil
}

// checkKey calls GET /v1/me with o and returns the key's name.
func checkKey(o abi.RestOptions) (string, error) {
	rt, err := backend.REST(o)
	if err != nil {
		return "", err
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), authTimeout)
	defer cancel()
	me, err := backend.Me(ctx, rt)
	if err != nil {
		return "", err
	}
	return me.Sub, nil
}

// readLine reads one line, without its line ending.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		if err == io.EOF {
			return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "auth login: nothing on stdin")
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// promptSecret reads a line from the terminal on stdin with its echo off.
func promptSecret(r *bufio.Reader, prompt string) (string, error) {
	saved, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return "", err
	}
	quiet := *saved
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	fmt.Fprint(os.Stderr, prompt)
	if err := unix.IoctlSetTermios(0, unix.TCSETS, &quiet); err != nil {
		return "", err
	}
	defer func() {
		unix.IoctlSetTermios(0, unix.TCSETS, saved)
		fmt.Fprintln(os.Stderr)
	}()
	line, err := readLine(r)
	return strings.TrimSpace(line), err
}
