package vfd

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestSortExtentsKeepsCallerOrder(t *testing.T) {
	a, b, c := []byte{1}, []byte{2, 2}, []byte{3}
	exts := []Extent{{Off: 10, Buf: a}, {Off: 0, Buf: b}, {Off: 5, Buf: nil}, {Off: 2, Buf: c}}
	before := slices.Clone(exts)
	sorted, total, err := sortExtents(exts, true)
	if err != nil {
		t.Fatal(err)
	}
	if total != 4 {
		t.Errorf("total = %d, want 4", total)
	}
	if !slices.EqualFunc(exts, before, func(x, y Extent) bool { return x.Off == y.Off && len(x.Buf) == len(y.Buf) }) {
		t.Error("sortExtents reordered the caller's slice")
	}
	offs := []int64{}
	for _, e := range sorted {
		offs = append(offs, e.Off)
	}
	if !slices.Equal(offs, []int64{0, 2, 10}) {
		t.Errorf("sorted offsets = %v, want [0 2 10] (empty extent dropped)", offs)
	}
	// The sorted copy shares the caller's buffers.
	sorted[0].Buf[0] = 9
	if b[0] != 9 {
		t.Error("sorted extents do not share the caller's buffers")
	}
}

func TestSortExtentsInvalid(t *testing.T) {
	for name, exts := range map[string][]Extent{
		"negative": {{Off: -1, Buf: []byte{1}}},
		"overflow": {{Off: math.MaxInt64 - 1, Buf: []byte{1, 2}}},
		"overlap":  {{Off: 4, Buf: []byte{1, 2}}, {Off: 0, Buf: []byte{1, 2, 3, 4, 5}}},
		"same":     {{Off: 0, Buf: []byte{1}}, {Off: 0, Buf: []byte{1}}},
	} {
		if _, _, err := sortExtents(exts, true); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// Reads may overlap.
	if _, _, err := sortExtents([]Extent{{Off: 0, Buf: []byte{1}}, {Off: 0, Buf: []byte{1}}}, false); err != nil {
		t.Errorf("overlapping reads refused: %v", err)
	}
}

func TestForRuns(t *testing.T) {
	mk := func(spec ...int64) []Extent { // pairs of off, len
		var e []Extent
		for i := 0; i < len(spec); i += 2 {
			e = append(e, Extent{Off: spec[i], Buf: make([]byte, spec[i+1])})
		}
		return e
	}
	runLens := func(exts []Extent, max int) []int {
		var lens []int
		forRuns(exts, max, func(run []Extent) error {
			for i := 1; i < len(run); i++ {
				if run[i].Off != run[i-1].End() {
					t.Fatalf("run not adjacent: %v", run)
				}
			}
			lens = append(lens, len(run))
			return nil
		})
		return lens
	}
	exts := mk(0, 4, 4, 4, 8, 1, 10, 5, 15, 1, 20, 1)
	if got := runLens(exts, 1024); !slices.Equal(got, []int{3, 2, 1}) {
		t.Errorf("runs = %v, want [3 2 1]", got)
	}
	if got := runLens(exts, 2); !slices.Equal(got, []int{2, 1, 2, 1}) {
		t.Errorf("runs capped at 2 = %v, want [2 1 2 1]", got)
	}
	stop := errors.New("stop")
	calls := 0
	if err := forRuns(exts, 1024, func([]Extent) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("forRuns did not stop at the first error: %v after %d calls", err, calls)
	}
}
