package protocol

import (
	"strings"
	"testing"
)

func TestVolumeWordRoundTrip(t *testing.T) {
	in := []VolumeWord{{Index: 0, GuestPath: "/data"}, {Index: 31, ReadOnly: true, File: true, GuestPath: "/etc/a b\"%?#é.conf"}}
	var words []string
	for _, v := range in {
		w := v.String()
		if strings.ContainsAny(w, " \"\t\n") {
			t.Errorf("%q cannot be one kernel command line word", w)
		}
		words = append(words, w, "quiet")
	}
	out, err := ParseVolumeWords(words)
	if err != nil || len(out) != len(in) || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for _, bad := range []string{"boxlite.vol=x:rw:d:/a", "boxlite.vol=0:rx:d:/a", "boxlite.vol=0:rw:d:rel", "boxlite.vol=0:rw:d:/", "boxlite.vol=0:rw"} {
		if _, err := ParseVolumeWords([]string{bad}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestLayerSerials(t *testing.T) {
	for i := range []int{0, 1, 23} {
		s := LayerSerial(i)
		if j, ok := LayerIndex(s); !ok || j != i || len(s) > 20 {
			t.Errorf("layer %d: serial %q gives %d, %v", i, s, j, ok)
		}
	}
	for _, s := range []string{WritableSerial, LaneSerial, "layer", "layerx", "layer-1", "layer01"} {
		if _, ok := LayerIndex(s); ok {
			t.Errorf("%q read as a layer", s)
		}
	}
	if CmdlineLen("a", "bb") != 4 || CmdlineLen() != 0 {
		t.Error("CmdlineLen")
	}
	if v, ok := NetConfig([]string{"quiet", NetWord("10.0.2.15/24,10.0.2.2,4000")}); !ok || v != "10.0.2.15/24,10.0.2.2,4000" {
		t.Errorf("NetConfig = %q, %v", v, ok)
	}
}
