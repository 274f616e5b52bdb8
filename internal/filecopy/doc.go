// Package filecopy moves file trees as tar streams: Send archives a tree
// walked by directory descriptors, and Extract writes one under a directory
// it never leaves, whatever the stream says. Both ends of a box copy use it:
// the host and the guest agent.
package filecopy
