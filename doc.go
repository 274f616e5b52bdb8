// Package boxlite runs untrusted code in microVM sandboxes ("boxes"): each
// box is a virtual machine with its own Linux kernel, booted from an OCI
// image and driven by a guest agent. This is the Go API; Python, Node, C and
// Rust programs reach the same runtime through libboxlite.so.
//
// A Runtime owns a home directory ($BOXLITE_HOME, else ~/.boxlite) with the
// image store and the boxes. Runtime.Create registers a box (configured, no
// VM yet); Box.Start boots it, and so do Box.Exec, Box.Run, the copies and
// the sessions. Box.Stop removes the box (as BoxLite's default) unless it
// was created WithAutoRemove(false), which keeps its disk; Box.Remove
// deletes it. A box stops when the process that started it exits
// unless it was created WithDetach, and any process joins a running box with
// Runtime.Get.
//
//   - Commands: Box.Run collects a command's output; Box.Exec streams it
//     (Execution: Stdout, Stderr, Stdin, Wait, Signal, Resize on a terminal).
//   - Sessions: Box.NewPythonSession keeps one interpreter alive between
//     cells, so variables, imports and functions survive (CodeBox.run in the
//     SDKs); Box.NewShellSession does the same for a shell's cwd and exports.
//   - Files: Box.CopyIn and Box.CopyOut, as docker cp; volumes (WithVolume)
//     share host folders over virtio-fs.
//   - Snapshots and archives: Box.Snapshot*, Box.Clone, Box.Export and
//     Runtime.ImportBox.
//   - Networking: WithNetwork (allow-lists), WithPorts (published ports).
//
// Errors wrap the kinds of package errdefs (errdefs.ErrNotFound,
// ErrInvalidState, ErrTimeout, ...; test them with errors.Is) and name the
// operation and the state.
//
// The runtime needs its assets (boxlite-shim, boxlite-net, virtiofsd and
// guest/: `make build` lays them out in build/, `make install` copies them
// to /usr/local/lib/boxlite) beside the program, in PREFIX/lib/boxlite for a
// program in PREFIX/bin, in /usr/local/lib/boxlite or /usr/lib/boxlite, or
// where $BOXLITE_ASSETS or WithAssets says; and QEMU; it uses KVM where the CPU has VMX/SVM and falls
// back to TCG (emulation, flagged in Box.Info) elsewhere. No cgo is needed.
package boxlite
