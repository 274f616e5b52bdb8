package boxnet

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The registry question between the stack and the shim (on ProcRegistry),
// one line each way: the stack asks "ID PROTO PORT", the shim answers
// "ID 1" (a box publishes that host port) or "ID 0". ID counts up from 1
// on each question, so that an answer that comes after its question timed
// out is recognised as stale and dropped, never taken for the answer to a
// later question.

// maxExchangeLine bounds a question or an answer line, newline included.
const maxExchangeLine = 64

// AskPublished returns the stack's question function over conn (its end of
// ProcRegistry): whether a host port is a box's published one. A question
// that is not answered within wait, or any failure of the socket, counts
// as published (the stack refuses the connection). Questions are asked
// one at a time.
func AskPublished(conn net.Conn, wait time.Duration) func(proto string, port uint16) bool {
	var mu sync.Mutex
	var id uint64
	rd := bufio.NewReaderSize(conn, maxExchangeLine)
	return func(proto string, port uint16) bool {
		mu.Lock()
		defer mu.Unlock()
		id++
		conn.SetDeadline(time.Now().Add(wait))
		if _, err := fmt.Fprintf(conn, "%d %s %d\n", id, proto, port); err != nil {
			return true
		}
		for {
			line, err := rd.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				// Not an answer: skip to the end of the line.
				for err == bufio.ErrBufferFull {
					_, err = rd.ReadSlice('\n')
				}
				continue
			}
			if err != nil {
				// Timed out (the rest of a half-read line is then
				// skipped as junk by the next question) or closed.
				return true
			}
			got, answer, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
			if n, err := strconv.ParseUint(got, 10, 64); !ok || err != nil || n != id {
				continue // stale (an earlier question's) or junk
			}
			return answer != "0"
		}
	}
}

// AnswerPublished answers the stack's questions on conn (the shim's end of
// ProcRegistry) with published until conn fails. The stack is confined, not
// trusted: a line that is not a well-formed question ends the answers (the
// stack then refuses every connection to a host port).
func AnswerPublished(conn net.Conn, published func(proto string, port uint16) bool) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, maxExchangeLine), maxExchangeLine)
	for sc.Scan() {
		f := strings.Split(sc.Text(), " ")
		if len(f) != 3 || (f[1] != "tcp" && f[1] != "udp") {
			return
		}
		id, err1 := strconv.ParseUint(f[0], 10, 64)
		port, err2 := strconv.ParseUint(f[2], 10, 16)
		if err1 != nil || err2 != nil {
			return
		}
		answer := 0
		if published(f[1], uint16(port)) {
			answer = 1
		}
		if _, err := fmt.Fprintf(conn, "%d %d\n", id, answer); err != nil {
			return
		}
	}
}
