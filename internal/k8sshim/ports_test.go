package k8sshim

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

func TestHostPorts(t *testing.T) {
	hostNet := func(v string) *spec { return &spec{Annotations: map[string]string{annHostPorts: v}} }
	got, err := hostNet("8080, 9090/udp,127.0.0.1:8443:443").hostPorts()
	want := []boxlite.Port{
		{HostIP: "0.0.0.0", HostPort: 8080, GuestPort: 8080},
		{Protocol: "udp", HostIP: "0.0.0.0", HostPort: 9090, GuestPort: 9090},
		{HostIP: "127.0.0.1", HostPort: 8443, GuestPort: 443},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	if got, err := (&spec{}).hostPorts(); err != nil || got != nil {
		t.Errorf("no annotation: %+v, %v", got, err)
	}
	var many []string
	for i := 1; i <= boxlite.MaxPorts+1; i++ {
		many = append(many, fmt.Sprint(1000+i))
	}
	var podNet spec // a pod with a network namespace of its own
	if err := json.Unmarshal([]byte(`{"annotations":{"io.boxlite.host-ports":"8080"},"linux":{"namespaces":[{"type":"network"}]}}`), &podNet); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    *spec
		kind error
		in   string // what the error names
	}{
		{hostNet("8080,x"), errdefs.ErrInvalidArgument, `"x"`},
		{hostNet(""), errdefs.ErrInvalidArgument, `port ""`},
		{hostNet("0:80"), errdefs.ErrInvalidArgument, `"0:80"`},
		{hostNet(":80"), errdefs.ErrInvalidArgument, `":80"`},
		{hostNet("70000"), errdefs.ErrInvalidArgument, `"70000"`},
		{hostNet("80/sctp"), errdefs.ErrInvalidArgument, `"sctp"`},
		{hostNet("1:2:3:4"), errdefs.ErrInvalidArgument, `"1:2:3:4"`},
		{hostNet(strings.Join(many, ",")), errdefs.ErrLimit, "at most 64"},
		{hostNet(strings.Repeat("1", maxHostPortsAnn+1)), errdefs.ErrLimit, annHostPorts},
		{&spec{Annotations: map[string]string{"io.boxlite.host-port": "80"}}, errdefs.ErrInvalidArgument, "io.boxlite.host-port"},
		{&podNet, errdefs.ErrInvalidArgument, "hostNetwork"},
	} {
		if _, err := c.s.hostPorts(); !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.in) || !strings.Contains(err.Error(), "io.boxlite.") {
			t.Errorf("%v: got %v, want %v naming %s", c.s.Annotations, err, c.kind, c.in)
		}
	}
}
