package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// execGrace is how long run and exec wait, after passing a signal on to
// their command, for it to end before they abandon it (killing it in the
// box): a command whose background child holds its output open would
// otherwise keep them waiting as long as that child lives.
const execGrace = 3 * time.Second

// cleanupTimeout bounds what a command does after an interrupt: stopping
// or removing its box.
const cleanupTimeout = 60 * time.Second

// interrupts catches SIGINT, SIGTERM and SIGHUP for the commands that own a
// box or a command in one (run, exec, start, restart), so that they end
// promptly and clean up (run --rm removes its box) instead of dying where
// they stand or waiting for ever. Before a command runs in the box, a
// signal cancels ctx (a start under way is cancelled: its shim and VMM
// are ended); while one runs, the first signal is passed on to it and
// gives it execGrace to end, and a second, or the grace running out,
// cancels ctx.
type interrupts struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal

	mu      sync.Mutex
	sig     syscall.Signal // the first caught; 0: none
	forward func(syscall.Signal)
}

func catchInterrupts() *interrupts {
	ctx, cancel := context.WithCancel(context.Background())
	in := &interrupts{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 4)}
	signal.Notify(in.ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go in.loop()
	return in
}

func (in *interrupts) loop() {
	for s := range in.ch {
		sig, _ := s.(syscall.Signal)
		in.mu.Lock()
		first := in.sig == 0
		if first {
			in.sig = sig
		}
		fwd := in.forward
		in.mu.Unlock()
		switch {
		case fwd != nil && first:
			fwd(sig)
			time.AfterFunc(execGrace, in.cancel)
		default:
			in.cancel()
		}
	}
}

// stop stops catching: the signals have their default effect again.
func (in *interrupts) stop() {
	signal.Stop(in.ch)
	close(in.ch)
	in.cancel()
}

// caught is the first signal caught, 0 if none.
func (in *interrupts) caught() syscall.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// forwardTo passes signals to f (the command running in the box) until
// the returned function is called.
func (in *interrupts) forwardTo(f func(syscall.Signal)) (done func()) {
	in.mu.Lock()
	in.forward = f
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		in.forward = nil
		in.mu.Unlock()
	}
}

// interrupted turns err, when a caught signal caused it, into the exit
// code of a process that signal ended (128+N), after saying so on stderr.
func (in *interrupts) interrupted(op string, err error) (int, error) {
	sig := in.caught()
	if err == nil || sig == 0 {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "boxlite: %s: interrupted by %s\n", op, sigName(sig))
	return 128 + int(sig), nil
}

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// cleanupContext bounds the clean-up after a command, interrupted or not.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cleanupTimeout)
}
