package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/e2b"
	"github.com/boxlite/boxlite/internal/restapi"
	"github.com/boxlite/boxlite/internal/serve"
)

// defaultKeysFile is the key file of the runtime home: $BOXLITE_HOME/serve/keys.
func defaultKeysFile() string {
	home := os.Getenv("BOXLITE_HOME")
	if home == "" {
		h, _ := os.UserHomeDir()
		home = filepath.Join(h, ".boxlite")
	}
	return filepath.Join(home, "serve", "keys")
}

// cmdServe is `boxlite serve [flags]` and `boxlite serve key ...`.
func cmdServe(args []string) error {
	if len(args) > 0 && args[0] == "key" {
		return cmdServeKey(args[1:])
	}
	fs := newFlags("serve")
	listen := fs.String("listen", serve.DefaultListen, "`HOST:PORT` to listen on")
	cert := fs.String("tls-cert", "", "TLS certificate `FILE` (PEM)")
	key := fs.String("tls-key", "", "TLS private key `FILE` (PEM)")
	insecure := fs.Bool("insecure-no-tls", false, "allow a non-loopback --listen without TLS (a TLS proxy in front)")
	keys := fs.String("keys", defaultKeysFile(), "key `FILE` (boxlite serve key create)")
	accessLog := fs.String("access-log", "-", "access log `FILE` (JSON lines; - is stderr, empty: none)")
	boxes := fs.Int("max-boxes-per-key", restapi.DefaultBoxesPerKey, "`N` boxes one key may have")
	mem := fs.Int("max-memory-mib-per-key", restapi.DefaultMemoryMiBPerKey, "memory (`MIB`) one key's boxes may be given")
	execs := fs.Int("max-execs-per-key", restapi.DefaultExecsPerKey, "`N` executions of one key that may run at once")
	transfer := fs.Int64("max-transfer-bytes", restapi.DefaultTransferBytes, "largest upload, download or import (`BYTES`)")
	tunnelListen := fs.String("tunnel-listen", "", "`HOST:PORT` for BoxLite's tunnel CONNECTs (default: a free port on --listen's host)")
	tunnelURL := fs.String("tunnel-url", "", "`URL` (http(s)://HOST[:PORT]) the tunnel descriptors name, when a proxy is in front of --tunnel-listen")
	templates := fs.String("e2b-templates", "", "E2B template table `FILE`: TEMPLATE-ID IMAGE a line (default: base alpine:latest, code-interpreter-v1 python:slim; docs/e2b.md)")
	pos, err := parseArgs(fs, args, true)
	if err == nil {
		err = noArgs("serve", pos)
	}
	if err != nil {
		return err
	}
	cfg := serve.Config{Listen: *listen, TLSCert: *cert, TLSKey: *key, InsecureNoTLS: *insecure, KeysFile: *keys,
		TunnelListen: *tunnelListen, TunnelURL: *tunnelURL,
		Limits: restapi.Limits{BoxesPerKey: *boxes, MemoryMiBPerKey: *mem, ExecsPerKey: *execs, TransferBytes: *transfer}}
	if *templates != "" {
		t, err := e2b.ReadTemplates(*templates)
		if err != nil {
			return err
		}
		cfg.E2BTemplates = t
	}
	switch *accessLog {
	case "":
	case "-":
		cfg.AccessLog = os.Stderr
	default:
		f, err := os.OpenFile(*accessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.AccessLog = f
	}
	rt, err := boxlite.NewRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	srv, err := serve.New(cfg, rt)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	scheme := "http"
	if *cert != "" {
		scheme = "https"
	}
	fmt.Fprintf(os.Stderr, "boxlite serve: listening on %s://%s (BoxLite REST API under /v1, E2B's under /e2b; keys in %s); tunnels on %s\n", scheme, srv.Addr(), *keys, srv.TunnelAddr())
	err = srv.Serve(ctx)
	fmt.Fprintln(os.Stderr, "boxlite serve: stopped; its boxes keep running (they are detached)")
	return err
}

func cmdServeKey(args []string) error {
	if _, err := subcommand("serve key", args, "create", "ls", "rm"); err != nil {
		return err
	}
	cmd := "serve key " + args[0]
	fs := newFlags(cmd)
	keys := fs.String("keys", defaultKeysFile(), "key `FILE`")
	var name *string
	if args[0] == "create" {
		name = fs.String("name", "", "the key's `NAME` (default key-N)")
	}
	pos, err := parseArgs(fs, args[1:], true)
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if len(pos) > 0 {
			return usageError(cmd, "unexpected argument %q (the name goes in --name)", pos[0])
		}
		value, k, err := serve.CreateKey(*keys, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "key %q added to %s; it is shown once, here:\n", k.Name, *keys)
		fmt.Println(value)
	case "ls":
		if err := noArgs(cmd, pos); err != nil {
			return err
		}
		ks, err := serve.ReadKeys(*keys)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tCREATED")
		for _, k := range ks {
			fmt.Fprintf(tw, "%s\t%s\n", k.Name, k.Created.Local().Format(time.RFC3339))
		}
		return tw.Flush()
	case "rm":
		if len(pos) != 1 {
			return usageError(cmd, "want one NAME")
		}
		return serve.RemoveKey(*keys, pos[0])
	}
	return nil
}
