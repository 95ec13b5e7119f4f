package filter

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestSpecString(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{ID: Shuffle}, "shuffle"},
		{Spec{ID: Deflate, Level: 1}, "deflate(1)"},
		{Spec{ID: Deflate, Level: 9}, "deflate(9)"},
		{Spec{ID: Zlib, Level: 6}, "zlib(6)"},
		{Spec{ID: Zstd, Level: 1}, "zstd(1)"},
		{Spec{ID: Zstd, Level: 4}, "zstd(4)"},
		{Spec{ID: LZ4}, "lz4"},
		{Spec{ID: CRC32C}, "crc32c"},
		{Spec{ID: 99}, "filter#99"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	good := []Spec{
		{ID: Shuffle}, {ID: LZ4}, {ID: CRC32C},
		{ID: Shuffle, Level: 7}, // ignored level
		{ID: Deflate, Level: 1}, {ID: Deflate, Level: 9},
		{ID: Zlib, Level: 1}, {ID: Zlib, Level: 9},
		{ID: Zstd, Level: 1}, {ID: Zstd, Level: 4}, {ID: Zstd, Level: 0},
		{ID: Zstd, Level: 22}, {ID: Zstd, Level: -5}, {ID: Zstd, Level: ZstdMinLevel},
	}
	for _, s := range good {
		if err := s.Validate(); err != nil {
			t.Errorf("%v.Validate() = %v, want nil", s, err)
		}
	}
	bad := []Spec{
		{ID: 0}, {ID: 8}, {ID: 0xFFFF},
		{ID: zstdPreset, Level: 1}, // read only: new datasets get Zstd
		{ID: Deflate, Level: 0}, {ID: Deflate, Level: 10}, {ID: Deflate, Level: -1},
		{ID: Zlib, Level: 0}, {ID: Zlib, Level: 10},
		{ID: Zstd, Level: 23}, {ID: Zstd, Level: ZstdMinLevel - 1}, {ID: Zstd, Level: math.MinInt32},
	}
	for _, s := range bad {
		if err := s.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%#v.Validate() = %v, want ErrInvalid", s, err)
		}
	}
}

// TestIDsStable pins the on-disk numbers: changing one breaks every file.
func TestIDsStable(t *testing.T) {
	if Shuffle != 1 || Deflate != 2 || zstdPreset != 3 || LZ4 != 4 || CRC32C != 5 || Zlib != 6 || Zstd != 7 {
		t.Fatal("filter IDs were renumbered")
	}
	got := EncodeSpecs([]Spec{{ID: Shuffle}, {ID: Zstd, Level: -7}, {ID: CRC32C}})
	want := []byte{1, 3, 1, 0, 0, 0, 0, 0, 7, 0, 0xF9, 0xFF, 0xFF, 0xFF, 5, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeSpecs = %v, want %v", got, want)
	}
}

func TestSpecsRoundTrip(t *testing.T) {
	lists := [][]Spec{
		nil,
		{{ID: Shuffle}},
		{{ID: Shuffle}, {ID: Zstd, Level: 1}},
		{{ID: Deflate, Level: 9}, {ID: LZ4}, {ID: CRC32C}},
		make([]Spec, MaxFilters),
	}
	for i := range lists[4] {
		ids := []ID{Shuffle, Deflate, Zstd, LZ4, CRC32C, Zlib}
		lists[4][i] = Spec{ID: ids[i%len(ids)], Level: int32(1 + i%4)}
	}
	for _, specs := range lists {
		b := EncodeSpecs(specs)
		got, err := DecodeSpecs(b)
		if err != nil {
			t.Fatalf("DecodeSpecs(EncodeSpecs(%v)): %v", specs, err)
		}
		if len(got) != len(specs) {
			t.Fatalf("got %d specs, want %d", len(got), len(specs))
		}
		for i := range specs {
			if got[i] != specs[i].normalize() {
				t.Errorf("spec %d: got %v, want %v", i, got[i], specs[i].normalize())
			}
		}
	}
}

func TestDecodeSpecsCorrupt(t *testing.T) {
	valid := EncodeSpecs([]Spec{{ID: Shuffle}, {ID: Deflate, Level: 5}})
	tooMany := EncodeSpecs(make([]Spec, MaxFilters+1))
	for name, b := range map[string][]byte{
		"empty":          {},
		"one byte":       {1},
		"bad version":    append([]byte{2}, valid[1:]...),
		"truncated":      valid[:len(valid)-1],
		"trailing":       append(bytes.Clone(valid), 0),
		"count too big":  {1, 3, 1, 0, 0, 0, 0, 0},
		"33 filters":     tooMany,
		"255 filters":    {1, 255},
		"id zero":        {1, 1, 0, 0, 0, 0, 0, 0},
		"deflate lvl 0":  {1, 1, 2, 0, 0, 0, 0, 0},
		"zstd preset 0":  {1, 1, 3, 0, 0, 0, 0, 0},
		"zstd preset 5":  {1, 1, 3, 0, 5, 0, 0, 0},
		"zstd preset -1": {1, 1, 3, 0, 0xFF, 0xFF, 0xFF, 0xFF},
		"zstd lvl 0":     {1, 1, 7, 0, 0, 0, 0, 0},
		"zstd lvl 23":    {1, 1, 7, 0, 23, 0, 0, 0},
		"zstd lvl min-1": {1, 1, 7, 0, 0xFF, 0xFF, 0xFD, 0xFF},
		"shuffle lvl 1":  {1, 1, 1, 0, 1, 0, 0, 0},
		"crc32c lvl big": {1, 1, 5, 0, 0, 0, 0, 0x80},
	} {
		if _, err := DecodeSpecs(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeSpecs(%v) = %v, want ErrCorrupt", name, b, err)
		}
	}
	// An intact list naming a filter from a newer version is not damage.
	for _, id := range []byte{8, 9} {
		if _, err := DecodeSpecs([]byte{1, 1, id, 0, 0, 0, 0, 0}); !errors.Is(err, ErrUnknown) || errors.Is(err, ErrCorrupt) {
			t.Errorf("unknown id %d: %v, want ErrUnknown only", id, err)
		}
	}
}

func TestNewPipelineInvalid(t *testing.T) {
	for name, tc := range map[string]struct {
		specs []Spec
		es    int
	}{
		"elem size 0":     {nil, 0},
		"elem size -1":    {nil, -1},
		"elem size big":   {nil, MaxElemSize + 1},
		"unknown filter":  {[]Spec{{ID: 42}}, 2},
		"bad zstd level":  {[]Spec{{ID: Shuffle}, {ID: Zstd, Level: 23}}, 2},
		"zstd preset":     {[]Spec{{ID: zstdPreset, Level: 2}}, 2},
		"too many filter": {make([]Spec, MaxFilters+1), 2},
	} {
		if tc.specs != nil && len(tc.specs) > MaxFilters {
			for i := range tc.specs {
				tc.specs[i] = Spec{ID: Shuffle}
			}
		}
		if _, err := NewPipeline(tc.specs, tc.es); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: NewPipeline = %v, want ErrInvalid", name, err)
		}
	}
}

func TestPipelineSpecsNormalisedAndCopied(t *testing.T) {
	in := []Spec{{ID: Shuffle, Level: 3}, {ID: Zstd, Level: 2}, {ID: CRC32C, Level: -1}}
	p, err := NewPipeline(in, 4)
	if err != nil {
		t.Fatal(err)
	}
	got := p.Specs()
	want := []Spec{{ID: Shuffle}, {ID: Zstd, Level: 2}, {ID: CRC32C}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Specs()[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	got[0] = Spec{ID: LZ4}
	if p.Specs()[0] != want[0] {
		t.Fatal("Specs() returned the pipeline's own slice")
	}
	if s := p.String(); s != "shuffle+zstd(2)+crc32c" {
		t.Fatalf("String() = %q", s)
	}
	if p.ElemSize() != 4 {
		t.Fatalf("ElemSize() = %d", p.ElemSize())
	}
	if !bytes.Equal(EncodeSpecs(in), EncodeSpecs(want)) {
		t.Fatal("EncodeSpecs does not normalise ignored levels")
	}
}
