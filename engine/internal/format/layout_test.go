package format

import (
	"errors"
	"reflect"
	"testing"
)

// TestSparseLayoutV2Only: the sparse layout code is valid in v2 headers,
// round-trips with its LayoutParams, and is corruption in a v1 header
// (layouts other than dense came with version 2, FORMAT.md §8).
func TestSparseLayoutV2Only(t *testing.T) {
	h := DatasetHeader{Name: "s", ID: 3, Type: 6, Shape: []uint64{4}, MaxShape: []uint64{4}, Chunk: []uint64{4},
		Layout: LayoutSparse, LayoutParams: []byte{1, 1, 0}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDatasetHeader(EncodeDatasetHeader(h))
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("v2 round trip: %+v %v", got, err)
	}
	h.LayoutParams = nil // a v1 block has no parts
	for _, code := range []uint8{LayoutSparse, LayoutContiguous, LayoutVlen} {
		h.Layout = code
		v1 := reseal(EncodeDatasetHeader(h), func(b []byte) { b[4] = 1 })
		if _, err := DecodeDatasetHeader(v1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("v1 header with layout %d: %v", code, err)
		}
		if _, err := DecodeDatasetHeader(EncodeDatasetHeader(h)); err != nil {
			t.Fatalf("v2 header with layout %d: %v", code, err)
		}
	}
}
