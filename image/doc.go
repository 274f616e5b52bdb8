// Package image is a content-addressed local store of OCI images whose layers it turns into ext4 images for the guest.
package image
