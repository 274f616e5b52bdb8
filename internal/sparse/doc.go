// Package sparse copies files by their data extents (or a reflink), so that
// a disk or memory image costs what it holds, not its size.
package sparse
