package main

import (
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
)

// TestFormatAttr checks how ls and dump render each kind of attribute, and
// that long values are cut with their full length said rather than printed
// whole.
func TestFormatAttr(t *testing.T) {
	long := make([]int32, 40)
	for i := range long {
		long[i] = int32(i)
	}
	for _, c := range []struct {
		v          engine.AttrValue
		typ, value string
	}{
		{engine.StringAttr(`say "hi"`), "string", `"say \"hi\""`},
		{engine.BytesAttr([]byte{0xde, 0xad}), "bytes", "0xdead"},
		{engine.ScalarAttr(int16(-7)), "int16", "-7"},
		{engine.ArrayAttr([]float64{0.5, 2}), "float64[2]", "[0.5, 2]"},
		{engine.ArrayAttr(long), "int32[40]", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, … (40 elements)]"},
		{engine.StringAttr(strings.Repeat("a", 300)), "string", `"` + strings.Repeat("a", 256) + `"… (300 bytes)`},
		{engine.BytesAttr(make([]byte, 65)), "bytes", "0x" + strings.Repeat("00", 64) + "… (65 bytes)"},
	} {
		if got := attrType(c.v); got != c.typ {
			t.Errorf("attrType = %q, want %q", got, c.typ)
		}
		if got := formatAttr(c.v); got != c.value {
			t.Errorf("formatAttr = %q, want %q", got, c.value)
		}
	}
	got := listAttrs([]engine.Attr{{Name: "units", Value: engine.StringAttr("m")}})
	if len(got) != 1 || got[0] != (lsAttr{"units", "string", `"m"`}) {
		t.Fatalf("listAttrs = %+v", got)
	}
}
