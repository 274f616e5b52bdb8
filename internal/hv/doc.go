// Package hv starts, supervises and stops the VMM (QEMU microvm) for one box.
package hv
