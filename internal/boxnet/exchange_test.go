package boxnet

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestAskPublishedDropsStaleAnswers: the shim answers the first question
// ("is 80 published?": no) only after the stack gave up on it; the second
// question's answer ("is 443 published?": yes) must not be read from that
// stale line. The old exchange (bare "0"/"1" lines) took the stale "0" and
// let the box through to a published port.
func TestAskPublishedDropsStaleAnswers(t *testing.T) {
	stack, shim := net.Pipe()
	defer stack.Close()
	defer shim.Close()
	ask := AskPublished(stack, 200*time.Millisecond)
	secondAsked := make(chan struct{})
	go func() {
		rd := bufio.NewReader(shim)
		q1, _ := rd.ReadString('\n') // "1 tcp 80"
		q2, _ := rd.ReadString('\n') // "2 tcp 443", asked after q1 timed out
		close(secondAsked)
		id1, id2 := strings.Fields(q1)[0], strings.Fields(q2)[0]
		// The late answer to q1, then junk and a half line, then q2's.
		fmt.Fprintf(shim, "%s 0\n", id1)
		fmt.Fprintf(shim, "garbage\n%s\n7", strings.Repeat("x", 200))
		fmt.Fprintf(shim, "\n%s 1\n", id2)
	}()
	if !ask("tcp", 80) {
		t.Error("an unanswered question must count as published")
	}
	if !ask("tcp", 443) {
		t.Error("the second question took the first's stale answer (not published)")
	}
	<-secondAsked

	// And the other way round: a stale "published" does not refuse a
	// port that is not.
	stack2, shim2 := net.Pipe()
	defer stack2.Close()
	defer shim2.Close()
	ask2 := AskPublished(stack2, 200*time.Millisecond)
	go func() {
		rd := bufio.NewReader(shim2)
		rd.ReadString('\n')
		q2, _ := rd.ReadString('\n')
		fmt.Fprintf(shim2, "1 1\n%s 0\n", strings.Fields(q2)[0])
	}()
	ask2("udp", 53)
	if ask2("udp", 54) {
		t.Error("the second question took the first's stale answer (published)")
	}
}

// TestAnswerPublished: the shim echoes each question's id and stops
// answering at the first line that is not a question.
func TestAnswerPublished(t *testing.T) {
	stack, shim := net.Pipe()
	defer stack.Close()
	done := make(chan struct{})
	go func() {
		AnswerPublished(shim, func(proto string, port uint16) bool { return proto == "tcp" && port == 8080 })
		close(done)
	}()
	rd := bufio.NewReader(stack)
	for _, c := range []struct{ q, want string }{
		{"41 tcp 8080\n", "41 1\n"}, {"42 udp 8080\n", "42 0\n"}, {"7 tcp 80\n", "7 0\n"},
	} {
		stack.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(stack, c.q)
		if got, err := rd.ReadString('\n'); got != c.want {
			t.Errorf("%q answered %q (%v), want %q", c.q, got, err, c.want)
		}
	}
	for _, junk := range []string{"tcp 80\n", "1 sctp 80\n", "1 tcp 70000\n", "x tcp 80\n", strings.Repeat("9", 100) + "\n"} {
		stack2, shim2 := net.Pipe()
		ended := make(chan struct{})
		go func() { AnswerPublished(shim2, func(string, uint16) bool { return false }); close(ended) }()
		stack2.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(stack2, junk)
		if b, err := bufio.NewReader(stack2).ReadString('\n'); err == nil {
			t.Errorf("%q got an answer %q", junk, b)
		}
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Errorf("%q did not end the answers", junk)
		}
		stack2.Close()
	}
	stack.Close()
	<-done
}
