package protocol

import (
	"encoding/binary"
	"fmt"
)

// maxDepth bounds msgpack nesting; no message of ours nests deeper than 3.
const maxDepth = 16

// validate walks a msgpack body and rejects any string, binary, array or map
// that claims more than the bytes left, or nests deeper than maxDepth. A
// hostile guest could otherwise make the host allocate gigabytes from a few
// bytes of header.
func validate(b []byte) error {
	rest, err := skip(b, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes", len(rest))
	}
	return nil
}

// skip returns b after the first msgpack value.
func skip(b []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("truncated")
	}
	c, b := b[0], b[1:]
	// size reads an n-byte big-endian length.
	size := func(n int) (int, error) {
		if len(b) < n {
			return 0, fmt.Errorf("truncated length")
		}
		var v uint64
		switch n {
		case 1:
			v = uint64(b[0])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b))
		}
		b = b[n:]
		if v > uint64(len(b)) { // every element takes at least one byte
			return 0, fmt.Errorf("claims %d bytes or items, %d left", v, len(b))
		}
		return int(v), nil
	}
	raw := func(n int, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		return b[n:], nil
	}
	items := func(n int, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if b, err = skip(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	fixed := func(n int) ([]byte, error) {
		if len(b) < n {
			return nil, fmt.Errorf("truncated")
		}
		return b[n:], nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return b, nil
	case c >= 0x80 && c <= 0x8f:
		return items(2*int(c&0x0f), nil)
	case c >= 0x90 && c <= 0x9f:
		return items(int(c&0x0f), nil)
	case c >= 0xa0 && c <= 0xbf:
		return fixed(int(c & 0x1f))
	}
	switch c {
	case 0xc4, 0xd9:
		return raw(size(1))
	case 0xc5, 0xda:
		return raw(size(2))
	case 0xc6, 0xdb:
		return raw(size(4))
	case 0xcc, 0xd0:
		return fixed(1)
	case 0xcd, 0xd1:
		return fixed(2)
	case 0xca, 0xce, 0xd2:
		return fixed(4)
	case 0xcb, 0xcf, 0xd3:
		return fixed(8)
	case 0xdc:
		return items(size(2))
	case 0xdd:
		return items(size(4))
	case 0xde:
		n, err := size(2)
		return items(2*n, err)
	case 0xdf:
		n, err := size(4)
		return items(2*n, err)
	}
	return nil, fmt.Errorf("unsupported msgpack type 0x%02x", c)
}
