package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestFixedStringsEveryLayout writes random boxes of strings into a dataset
// of each fixed-size layout for each padding (and a string longer than the
// header's one-byte fill length, whose fill is a wide header part),
// mirrors them in a reference, then reopens the file and compares every
// element as text, the type's parameters and the fill value.
func TestFixedStringsEveryLayout(t *testing.T) {
	ctx := t.Context()
	dims := []uint64{11, 6}
	n := int(dims[0] * dims[1])
	types := []Type{
		FixedString(7, NullTerm, ASCII), FixedString(6, NullPad, UTF8),
		FixedString(9, SpacePad, ASCII), FixedString(300, NullPad, UTF8),
	}
	words := []string{"", "a", "héllo", "N/A", "x y", "\x00mid", "tab\t"}
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	rng := rand.New(rand.NewPCG(4, 5))
	refs := map[string][]string{}
	for _, typ := range types {
		fillText := "fill"
		fill, err := EncodeString(typ, fillText)
		if err != nil {
			t.Fatal(err)
		}
		specs := map[string]DatasetSpec{
			"chunked":    {Type: typ, Shape: dims, Chunk: []uint64{4, 3}, Fill: fill, Filters: []Filter{Shuffle(), Zstd(1)}},
			"contiguous": {Type: typ, Shape: dims, Layout: Contiguous, Fill: fill},
			"sparse":     {Type: typ, Shape: dims, Chunk: []uint64{5, 5}, Layout: Sparse, Fill: fill},
		}
		for lname, spec := range specs {
			name := fmt.Sprintf("%s-%d-%v-%v", lname, typ.StrLen(), typ.Pad(), typ.Charset())
			ds, err := f.CreateDataset(ctx, name, spec)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ref := slices.Repeat([]string{fillText}, n)
			for range 30 {
				start, count := randBox(rng, dims)
				vals := make([]string, count[0]*count[1])
				for i := range vals {
					vals[i] = words[rng.IntN(len(words))]
					if typ.Charset() == ASCII && vals[i] == "héllo" || typ.Pad() == NullTerm && strings.Contains(vals[i], "\x00") {
						vals[i] = "ok"
					}
				}
				if err := ds.WriteStrings(ctx, Box(start, count), vals); err != nil {
					t.Fatalf("%s: write: %v", name, err)
				}
				forBox(start, count, dims, func(k, flat int) { ref[flat] = vals[k] })
			}
			refs[name] = ref
		}
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, mem, &Options{ReadOnly: true})
	for name, ref := range refs {
		ds, err := f.OpenDataset(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		typ := ds.Type()
		if !slices.Contains(types, typ) || DecodeString(typ, ds.Fill()) != "fill" || len(ds.Fill()) != typ.StrLen() {
			t.Fatalf("%s reopened: type %v fill %q", name, typ, ds.Fill())
		}
		got, err := ds.ReadStrings(ctx, All(dims))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ref) {
			t.Fatalf("%s reopened: strings\n%q\nwant\n%q", name, got, ref)
		}
		// The stored bytes follow the padding rule.
		raw := make([]byte, n*typ.Size())
		if err := ds.Read(ctx, All(dims), raw); err != nil {
			t.Fatal(err)
		}
		for i, s := range ref {
			want, _ := EncodeString(typ, s)
			if e := raw[i*typ.Size() : (i+1)*typ.Size()]; string(e) != string(want) {
				t.Fatalf("%s element %d stored as %q, want %q", name, i, e, want)
			}
		}
	}
}

// TestEncodeStringRules: EncodeString refuses with ErrInvalid every string
// the padding or character set could not give back, and pads the others
// as HDF5 does.
func TestEncodeStringRules(t *testing.T) {
	for _, c := range []struct {
		t    Type
		s    string
		want string // "" refused
	}{
		{FixedString(4, NullTerm, ASCII), "abc", "abc\x00"},
		{FixedString(4, NullTerm, ASCII), "abcd", ""}, // no room for the NUL
		{FixedString(4, NullTerm, ASCII), "a\x00b", ""},
		{FixedString(4, NullPad, ASCII), "abcd", "abcd"},
		{FixedString(4, NullPad, ASCII), "ab", "ab\x00\x00"},
		{FixedString(4, NullPad, ASCII), "a\x00b", "a\x00b\x00"},
		{FixedString(4, NullPad, ASCII), "ab\x00", ""},
		{FixedString(4, NullPad, ASCII), "abcde", ""},
		{FixedString(4, SpacePad, ASCII), "ab", "ab  "},
		{FixedString(4, SpacePad, ASCII), "ab ", ""},
		{FixedString(4, SpacePad, ASCII), "é", ""}, // not ASCII
		{FixedString(4, SpacePad, UTF8), "é", "é  "},
		{FixedString(4, SpacePad, UTF8), "\xff", ""},
		{FixedString(2, SpacePad, UTF8), "日", ""}, // 3 bytes
		{Uint8, "a", ""},
		{FixedString(0, NullPad, ASCII), "", ""},
	} {
		b, err := EncodeString(c.t, c.s)
		switch {
		case c.want == "" && !errors.Is(err, ErrInvalid):
			t.Errorf("%v %q: %q, %v, want ErrInvalid", c.t, c.s, b, err)
		case c.want != "" && (err != nil || string(b) != c.want):
			t.Errorf("%v %q: %q, %v, want %q", c.t, c.s, b, err, c.want)
		case c.want != "" && DecodeString(c.t, b) != c.s:
			t.Errorf("%v %q: decodes as %q", c.t, c.s, DecodeString(c.t, b))
		}
	}
	// A NullTerm element without a NUL (as a foreign writer may fill it)
	// reads whole; bytes after the NUL are not text.
	if s := DecodeString(FixedString(3, NullTerm, ASCII), []byte("abc")); s != "abc" {
		t.Errorf("unterminated: %q", s)
	}
	if s := DecodeString(FixedString(4, NullTerm, ASCII), []byte("a\x00bc")); s != "a" {
		t.Errorf("after the NUL: %q", s)
	}
}

// TestFixedStringTypeChecks: the type's parameters are part of its value;
// an out-of-range one is not a valid type and is refused where a type is
// taken; strings are refused by the numeric typed API and a refused
// WriteStrings leaves the dataset as it was.
func TestFixedStringTypeChecks(t *testing.T) {
	ctx := t.Context()
	a, b := FixedString(8, NullPad, ASCII), FixedString(8, NullPad, UTF8)
	if a == b || a.Size() != 8 || !a.Valid() || a.Numeric() || a.Code() != 14 || a.String() != "string(8, nullpad, ascii)" {
		t.Fatalf("type values: %v %v %d", a, b, a.Size())
	}
	f := tCreate(t, vfd.NewMem(), nil)
	for _, bad := range []Type{FixedString(0, NullPad, ASCII), FixedString(MaxStringLen+1, NullPad, ASCII),
		FixedString(4, StrPad(3), ASCII), FixedString(4, NullPad, Charset(2)), Type(14), a | 1<<24} {
		if bad.Valid() {
			t.Errorf("%v is valid", bad)
		}
		if _, err := f.CreateDataset(ctx, "bad", DatasetSpec{Type: bad, Shape: []uint64{2}, Chunk: []uint64{2}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: create %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := f.CreateDataset(ctx, "vlen", DatasetSpec{Type: a, Shape: []uint64{2}, Chunk: []uint64{2}, Layout: Vlen}); !errors.Is(err, ErrInvalid) {
		t.Errorf("vlen of strings: %v, want ErrInvalid", err)
	}
	if _, err := f.CreateDataset(ctx, "shortfill", DatasetSpec{Type: a, Shape: []uint64{2}, Chunk: []uint64{2}, Fill: []byte("abc")}); !errors.Is(err, ErrInvalid) {
		t.Errorf("fill of 3 bytes: %v, want ErrInvalid", err)
	}
	ds, err := f.CreateDataset(ctx, "s", DatasetSpec{Type: a, Shape: []uint64{3}, Chunk: []uint64{2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.WriteStrings(ctx, All([]uint64{3}), []string{"one", "two", "three"}); err != nil {
		t.Fatal(err)
	}
	if err := ds.WriteStrings(ctx, All([]uint64{3}), []string{"x", "much too long", "y"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too long: %v, want ErrInvalid", err)
	}
	if err := ds.WriteStrings(ctx, All([]uint64{3}), []string{"x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("count mismatch: %v, want ErrInvalid", err)
	}
	if got, err := ds.ReadStrings(ctx, All([]uint64{3})); err != nil || !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("after refused writes: %q %v", got, err)
	}
	if err := ReadSlice(ctx, ds, All([]uint64{3}), make([]uint8, 3)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReadSlice[uint8] of strings: %v, want ErrInvalid", err)
	}
	num, err := f.CreateDataset(ctx, "n", DatasetSpec{Type: Int16, Shape: []uint64{3}, Chunk: []uint64{2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := num.WriteStrings(ctx, All([]uint64{3}), []string{"a", "b", "c"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("strings into int16: %v, want ErrInvalid", err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFixedStringAttrs: string-typed attributes keep their type's
// parameters and text through a reopen, on the file and on a dataset.
func TestFixedStringAttrs(t *testing.T) {
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	typ := FixedString(6, SpacePad, UTF8)
	v, err := FixedStringsAttr(typ, "α", "beta", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FixedStringsAttr(typ, "toolongvalue"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too long: %v", err)
	}
	if err := f.SetAttr(t.Context(), "names", v); err != nil {
		t.Fatal(err)
	}
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: FixedString(2, NullTerm, ASCII), Shape: []uint64{1}, Chunk: []uint64{1}})
	if err != nil {
		t.Fatal(err)
	}
	one, err := FixedStringsAttr(FixedString(300, NullPad, ASCII), strings.Repeat("z", 300))
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.SetAttr(t.Context(), "long", one); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, mem, &Options{ReadOnly: true})
	got, err := f.Attr("names")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := got.Strings(); err != nil || got.Type() != typ || !slices.Equal(s, []string{"α", "beta", ""}) {
		t.Fatalf("names: %v %q %v", got.Type(), s, err)
	}
	ds, err = f.OpenDataset(context.Background(), "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ds.Attr("long")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := a.Strings(); err != nil || len(s) != 1 || s[0] != strings.Repeat("z", 300) {
		t.Fatalf("long: %v", err)
	}
	if _, err := a.Float64s(); !errors.Is(err, ErrAttrType) {
		t.Fatalf("Float64s of strings: %v", err)
	}
}

// TestFixedStringAttrEncoding: a string attribute's parameters follow its
// type byte in an encoding of version 3 only; in an older encoding the
// code is damage, and a truncated or out-of-range parameter is too.
func TestFixedStringAttrEncoding(t *testing.T) {
	v, err := FixedStringsAttr(FixedString(3, NullTerm, UTF8), "ab", "")
	if err != nil {
		t.Fatal(err)
	}
	b := encodeAttrs([]Attr{{"s", v}})
	set, err := decodeAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.encoding(); !slices.Equal(got, b) {
		t.Fatalf("re-encoding differs: %x vs %x", got, b)
	}
	typeAt := 1 + 4 + 2 + 1 + 1 // version, count, name length, name, kind
	bad := map[string][]byte{
		"version 2": append([]byte{attrVersionV2}, b[1:]...),
		"truncated": b[:typeAt+1+3],
		"length 0":  slices.Concat(b[:typeAt+1], []byte{0, 0, 0, 0}, b[typeAt+5:]),
		"padding 3": slices.Concat(b[:typeAt+5], []byte{3}, b[typeAt+6:]),
	}
	for name, c := range bad {
		if _, err := decodeAttrs(c); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
