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
		{shaped(t, engine.ArrayAttr([]int32{1, 2, 3, 4, 5, 6}), 2, 3), "int32[2,3]", "[[1, 2, 3], [4, 5, 6]]"},
		{shaped(t, engine.ArrayAttr(long), 2, 4, 5), "int32[2,4,5]",
			"[[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, …]]] (40 elements)"},
		{shaped(t, engine.ArrayAttr([]uint8{}), 2, 0), "uint8[2,0]", "[[], []]"},
		{engine.NullAttr(engine.Float32), "null float32", "Empty"},
		{engine.NullAttr(0), "null string", "Empty"},
	} {
		if got := attrType(c.v); got != c.typ {
			t.Errorf("attrType = %q, want %q", got, c.typ)
		}
		if got := formatAttr(c.v); got != c.value {
			t.Errorf("formatAttr = %q, want %q", got, c.value)
		}
	}
	got := listAttrs([]engine.Attr{{Name: "m", Value: shaped(t, engine.ArrayAttr([]int8{1, 2}), 1, 2)}, {Name: "n", Value: engine.NullAttr(engine.Int8)}})
	if len(got) != 2 || got[0] != (lsAttr{"m", "int8[1,2]", "[[1, 2]]"}) || got[1] != (lsAttr{"n", "null int8", "Empty"}) {
		t.Fatalf("listAttrs = %+v", got)
	}
	got = listAttrs([]engine.Attr{{Name: "units", Value: engine.StringAttr("m")}})
	if len(got) != 1 || got[0] != (lsAttr{"units", "string", `"m"`}) {
		t.Fatalf("listAttrs = %+v", got)
	}
}

func shaped(t *testing.T, v engine.AttrValue, dims ...uint64) engine.AttrValue {
	t.Helper()
	w, err := v.WithShape(dims...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
