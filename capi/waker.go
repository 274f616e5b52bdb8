package main

// #include "capi.h"
import "C"

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/abi"
)

// waker wakes the readers of an object's output: readers blocked in this
// library through a channel that is closed (a broadcast) at every
// notification, event loops through an eventfd. mu also guards the owner's
// state that decides when the eventfd is set again.
type waker struct {
	mu      sync.Mutex
	efd     int // -1 once closed
	changed chan struct{}
}

func (w *waker) init() error {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return err
	}
	w.efd, w.changed = efd, make(chan struct{})
	return nil
}

// wakeLocked wakes blocked readers, and event loops when signalFD.
func (w *waker) wakeLocked(signalFD bool) {
	close(w.changed)
	w.changed = make(chan struct{})
	if signalFD && w.efd >= 0 {
		one := [8]byte{1}
		unix.Write(w.efd, one[:])
	}
}

// watch returns the channel the next notification closes; take it before
// looking for output, so that no arrival is missed.
func (w *waker) watch() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// resetLocked clears the eventfd after a read found nothing, and sets it
// again when the owner knows something is readable after all.
func (w *waker) resetLocked(again bool) {
	if w.efd < 0 {
		return
	}
	var buf [8]byte
	unix.Read(w.efd, buf[:])
	if again {
		one := [8]byte{1}
		unix.Write(w.efd, one[:])
	}
}

func (w *waker) fd() C.int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return C.int(w.efd)
}

func (w *waker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.efd >= 0 {
		unix.Close(w.efd)
		w.efd = -1
	}
}

// read runs try until it has an answer, waiting for notifications up to
// timeoutMs (0: never wait, < 0: as long as needed). When time is up, dry
// (which re-arms the eventfd) runs and the answer is BOXLITE_AGAIN.
func (w *waker) read(timeoutMs C.int64_t, try func() (C.int, bool), dry func()) C.int {
	wait := abi.Millis(timeoutMs)
	ctx, cancel := wait.Context(context.Background())
	defer cancel()
	for {
		changed := w.watch() // before trying, so no arrival is missed
		if rc, ok := try(); ok {
			return rc
		}
		if wait.Poll() {
			dry()
			return C.BOXLITE_AGAIN
		}
		select {
		case <-changed:
		case <-ctx.Done():
			dry()
			return C.BOXLITE_AGAIN
		}
	}
}
