// Command boxlite-agent is the guest agent: /init of the box VM's initramfs.
// Run as PID 1 it sets the guest up and serves the host over the boxlite.agent
// virtio-serial port. Run otherwise with -stdio, it serves the protocol on its
// stdin and stdout with the host's / as the box root, for development.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/boxlite/boxlite/guest/agent"
	"github.com/boxlite/boxlite/internal/protocol"
)

type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }

func main() {
	agent.ExecGate() // returns unless this is an exec gate (rlimits of a box process)
	if os.Getpid() == 1 {
		agent.Main() // never returns
	}
	serveStdio := flag.Bool("stdio", false, "serve the protocol on stdin/stdout (development; no chroot)")
	root := flag.String("root", "/", "box root for -stdio (paths and users are looked up in it)")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	switch {
	case *version:
		fmt.Println("boxlite-agent", agent.Version)
	case *serveStdio:
		err := agent.Serve(stdio{}, agent.Config{
			Root:  *root,
			Hello: protocol.Hello{Version: protocol.Version, Agent: "boxlite-agent/" + agent.Version},
			Logf: func(format string, args ...any) {
				fmt.Fprintf(os.Stderr, "boxlite-agent: "+format+"\n", args...)
			},
		})
		if err != nil && err != agent.ErrShutdown {
			fmt.Fprintln(os.Stderr, "boxlite-agent:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "boxlite-agent: not PID 1; this is the guest init of a boxlite VM (use -stdio to serve on stdio)")
		os.Exit(2)
	}
}
