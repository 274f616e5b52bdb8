// Package seccomp builds classic-BPF seccomp deny-list filters from a declarative Policy and installs them.
package seccomp
