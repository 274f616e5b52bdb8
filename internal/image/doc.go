// Package image is a content-addressed local store of OCI images, loaded from archives or pulled from registries, whose layers it turns into ext4 images for the guest.
package image
