package k8sshim

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

func TestLimitsFromResources(t *testing.T) {
	for _, tc := range []struct {
		json string
		want boxlite.RootLimits
		bad  bool
	}{
		{`{}`, boxlite.RootLimits{}, false},
		{`{"memory":{"limit":67108864},"pids":{"limit":50}}`, boxlite.RootLimits{MemoryMax: 64 << 20, PidsMax: 50}, false},
		{`{"memory":{"limit":-1},"pids":{"limit":-1},"cpu":{"quota":-1,"period":100000}}`, boxlite.RootLimits{}, false},
		// CRI's 0.5 CPU: quota 50 ms of 100 ms; shares 512 -> weight 20 (runc's formula).
		{`{"cpu":{"quota":50000,"period":100000,"shares":512}}`, boxlite.RootLimits{CPUQuota: 50000, CPUPeriod: 100000, CPUWeight: 20}, false},
		{`{"cpu":{"shares":2}}`, boxlite.RootLimits{CPUWeight: 1}, false},
		{`{"cpu":{"shares":1048576}}`, boxlite.RootLimits{CPUWeight: 10000}, false},
		// A quota without a period takes the default 100 ms; a tiny quota the kernel's 1 ms.
		{`{"cpu":{"quota":200}}`, boxlite.RootLimits{CPUQuota: 1000, CPUPeriod: 100000}, false},
		{`{"cpu":{"quota":50000,"period":5000000}}`, boxlite.RootLimits{}, true},
		{`{"pids":{"limit":100000000}}`, boxlite.RootLimits{}, true},
	} {
		var r ociResources
		if err := json.Unmarshal([]byte(tc.json), &r); err != nil {
			t.Fatal(err)
		}
		got, err := r.limits()
		if tc.bad {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("%s: err %v, want ErrInvalidArgument", tc.json, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.json, got, err, tc.want)
		}
	}
	var none *ociResources
	if l, err := none.limits(); err != nil || l != (boxlite.RootLimits{}) {
		t.Errorf("no resources: %+v, %v", l, err)
	}
}

// TestOOMEventsAreSpaced: a kill count that grows as fast as a box can
// send it gives one TaskOOM per oomEventGap; the init's exit publishes
// what is left; a count that does not grow publishes nothing.
func TestOOMEventsAreSpaced(t *testing.T) {
	p := &publisher{address: "unused", queue: make(chan event, 100)}
	s := &service{events: p}
	c := &container{id: "c1"}
	for k := uint64(1); k <= 50; k++ {
		s.noteOOM(c, k, false)
	}
	if n := len(p.queue); n != 1 {
		t.Fatalf("50 kills at once: %d events, want 1", n)
	}
	s.noteOOM(c, 50, true)
	if n := len(p.queue); n != 2 {
		t.Fatalf("at the exit, with kills unpublished: %d events, want 2", n)
	}
	s.noteOOM(c, 50, true)
	s.noteOOM(c, 3, false)
	if n := len(p.queue); n != 2 {
		t.Fatalf("no new kill: %d events, want 2", n)
	}
	c.oomAt = c.oomAt.Add(-oomEventGap)
	s.noteOOM(c, 51, false)
	if n := len(p.queue); n != 3 {
		t.Fatalf("a kill after the gap: %d events, want 3", n)
	}
	for range 3 {
		if ev := <-p.queue; ev.topic != topicOOM {
			t.Errorf("topic %q", ev.topic)
		}
	}
}
