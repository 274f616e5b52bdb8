// Package guest builds the boxlite guest: a kernel (built from Debian's
// linux-source with guest/kernel/boxlite.config, or Debian's cloud kernel) and
// an initramfs whose /init is boxlite-agent (see guest/agent), plus the boot
// test that runs it in QEMU.
package guest
