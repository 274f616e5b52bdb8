package netstack

import (
	"bytes"
	"io"
)

// replacer substitutes secrets' values for their placeholders in a stream,
// however its reads split a placeholder: it holds back at most the longest
// placeholder less one byte, so it keeps no more than one read's worth.
type replacer struct {
	src   io.Reader
	pairs [][2][]byte // placeholder, value
	hold  int         // longest placeholder - 1
	buf   []byte      // read, not yet replaced
	out   []byte      // replaced, not yet returned
	eof   bool
	err   error
}

// replaceChunk bounds one read from the source.
const replaceChunk = 32 << 10

func newReplacer(src io.Reader, pairs [][2][]byte) *replacer {
	r := &replacer{src: src, pairs: pairs}
	for _, p := range pairs {
		r.hold = max(r.hold, len(p[0])-1)
	}
	return r
}

func (r *replacer) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.eof {
			if len(r.buf) > 0 {
				r.out, r.buf = r.replace(r.buf, true), nil
				continue
			}
			return 0, r.err
		}
		chunk := make([]byte, replaceChunk)
		k, err := r.src.Read(chunk)
		r.buf = append(r.buf, chunk[:k]...)
		if err != nil {
			r.eof, r.err = true, err
			continue
		}
		cut := len(r.buf) - r.hold
		if cut <= 0 {
			continue
		}
		// Every placeholder starting before cut ends inside buf.
		done, rest := r.replaceUpTo(cut)
		r.out, r.buf = done, rest
	}
	k := copy(p, r.out)
	r.out = r.out[k:]
	return k, nil
}

// replaceUpTo replaces in r.buf the placeholders that start before cut, and
// returns the bytes done (everything before cut, or after the last
// placeholder replaced that ends past it) and the rest.
func (r *replacer) replaceUpTo(cut int) (done, rest []byte) {
	b := r.buf
	var out []byte
	i := 0
	for i < cut {
		at, which := -1, -1
		for k, p := range r.pairs {
			if j := bytes.Index(b[i:], p[0]); j >= 0 && i+j < cut && (at < 0 || i+j < at) {
				at, which = i+j, k
			}
		}
		if at < 0 {
			out = append(out, b[i:cut]...)
			i = cut
			break
		}
		out = append(out, b[i:at]...)
		out = append(out, r.pairs[which][1]...)
		i = at + len(r.pairs[which][0])
	}
	return out, append([]byte(nil), b[i:]...)
}

// replace replaces every placeholder in b (the stream's end).
func (r *replacer) replace(b []byte, _ bool) []byte {
	saved := r.buf
	r.buf = b
	done, _ := r.replaceUpTo(len(b))
	r.buf = saved
	return done
}

// replaceAll substitutes in a string (a header value, a request URI).
func replaceAll(s string, pairs [][2][]byte) string {
	for _, p := range pairs {
		if bytes.Contains([]byte(s), p[0]) {
			s = string(bytes.ReplaceAll([]byte(s), p[0], p[1]))
		}
	}
	return s
}
