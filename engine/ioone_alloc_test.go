package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestReadOneAllocs: a read of a small box inside a resident chunk (the
// single-chunk path, ioone.go) allocates nothing, for ranks 1 to 4 and
// element sizes 1 to 8, with copy plans of one run, one walked dimension
// and several. CI's non-race pass runs it (sync.Pool drops items at
// random under -race).
func TestReadOneAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race; the non-race pass runs this")
	}
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	cases := []struct {
		typ               Type
		shape, start, cnt []uint64
	}{
		{Uint8, []uint64{256, 256}, []uint64{10, 10}, []uint64{8, 8}},
		{Uint8, []uint64{1000}, []uint64{100}, []uint64{64}},
		{Float64, []uint64{16, 16, 16}, []uint64{3, 4, 5}, []uint64{2, 3, 4}},
		{Uint16, []uint64{8, 8, 8, 8}, []uint64{1, 2, 0, 0}, []uint64{2, 2, 8, 8}},
	}
	for i, tc := range cases {
		ds, err := f.CreateDataset(ctx, fmt.Sprint("d", i), DatasetSpec{Type: tc.typ, Shape: tc.shape, Chunk: tc.shape})
		if err != nil {
			t.Fatal(err)
		}
		es := ds.s.elemSize
		all := uint64(es)
		n := uint64(es)
		for d := range tc.shape {
			all *= tc.shape[d]
			n *= tc.cnt[d]
		}
		if err := ds.Write(ctx, Box(make([]uint64, len(tc.shape)), tc.shape), make([]byte, all)); err != nil {
			t.Fatal(err)
		}
		sel := Box(tc.start, tc.cnt)
		buf := make([]byte, n)
		// The selection takes the single-chunk path.
		sc := ioPool.Get().(*ioScratch)
		if !sc.buildOne(sel.hyper(), ds.s.mu.shape, ds.s.chunk, es, buf, ds.s.hot.Load()) {
			t.Fatalf("case %d: %v does not take the single-chunk path", i, sel.hyper())
		}
		sc.put()
		hits := ds.CacheStats().Hits
		var rerr error
		allocs := testing.AllocsPerRun(200, func() {
			if err := ds.Read(ctx, sel, buf); err != nil {
				rerr = err
			}
		})
		if rerr != nil {
			t.Fatal(rerr)
		}
		if allocs != 0 {
			t.Errorf("case %d (%v, elem %d): %v allocations per read, want 0", i, sel.hyper(), es, allocs)
		}
		if got := ds.CacheStats().Hits - hits; got < 200 {
			t.Errorf("case %d: %d hits over 201 reads: the chunk was not resident", i, got)
		}
	}
}
