//go:build linux

package agent

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lockOffMainThread locks the calling goroutine to an OS thread other than
// the process's main thread. Go never ends the main thread: when a locked
// goroutine exits there, the runtime parks it for ever, still in whatever
// state the goroutine left it (for the forking thread: in the box's
// namespaces, which would then outlive the sandbox). While a helper
// goroutine holds the main thread locked, this one runs elsewhere.
func lockOffMainThread() {
	for {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			return
		}
		runtime.UnlockOSThread()
		onMain, release := make(chan bool), make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			held := unix.Gettid() == unix.Getpid()
			onMain <- held
			if held {
				<-release
			}
		}()
		if !<-onMain {
			continue
		}
		runtime.LockOSThread()
		close(release)
		if unix.Gettid() != unix.Getpid() {
			return
		}
		runtime.UnlockOSThread() // cannot happen while the helper holds it; try again
	}
}
