// Package safetext makes text that came from a box (a guest, an image, an
// archive) safe to print: the one place control characters are taken out.
package safetext
