// Package guest builds the boxlite guest: a Debian kernel and an initramfs whose
// /init is boxlite-agent (see guest/agent), plus the boot test that runs it in QEMU.
package guest
