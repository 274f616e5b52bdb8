// Package protocol is the wire format between host and guest agent: length-prefixed
// frames with a stream id, msgpack bodies, and a versioned hello.
package protocol
