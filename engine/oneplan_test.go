package engine

import (
	"context"
	"testing"
	"unsafe"

	"github.com/scc-dev/scc/vfd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnePlanReused: the single-chunk builder keeps the plan it built and
// reuses it for the same block of the same dataset under the same extent
// and buffer length, and builds afresh when any of those differs (another
// place, another buffer length, an extent SetExtent replaced, another
// dataset). The plan's copy step is marked between the calls: a reuse
// keeps the mark, a rebuild replaces it.
func TestOnePlanReused(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, MaxShape: []uint64{Unlimited, 64}, Chunk: []uint64{16, 16}}
	a, err := f.CreateDataset(ctx, "a", spec)
	require.NoError(t, err)
	b, err := f.CreateDataset(ctx, "b", spec)
	require.NoError(t, err)
	for _, ds := range []*Dataset{a, b} {
		_, err := ds.s.hotDataset()
		require.NoError(t, err)
	}
	sc := ioPool.Get().(*ioScratch)
	defer sc.put()
	const mark = 1 << 40
	build := func(ds *Dataset, start, ext []uint64, n int) bool {
		s := ds.s
		ok := sc.buildBlock(start, ext, s.mu.shape, s.chunk, s.elemSize, make([]byte, n), s.hot.Load())
		require.True(t, ok)
		reused := sc.plan.rows.c0 == mark
		sc.plan.rows.c0 = mark
		return reused
	}
	start, ext := []uint64{18, 20}, []uint64{4, 8}
	assert.False(t, build(a, start, ext, 32), "first build")
	assert.True(t, build(a, []uint64{18, 20}, []uint64{4, 8}, 32), "same block: reused")
	assert.Equal(t, a.s.hot.Load(), sc.one[0].Dataset)
	assert.Equal(t, []uint64{1, 1}, []uint64(sc.one[0].Coord))

	assert.False(t, build(a, []uint64{18, 21}, ext, 32), "another place")
	assert.False(t, build(a, start, ext, 32), "back: built again")
	assert.False(t, build(b, start, ext, 32), "another dataset")
	assert.Equal(t, b.s.hot.Load(), sc.one[0].Dataset)
	assert.True(t, build(b, start, ext, 32))
	require.False(t, sc.buildBlock(start, ext, b.s.mu.shape, b.s.chunk, b.s.elemSize, make([]byte, 33), b.s.hot.Load()), "a wrong buffer length is refused")
	assert.False(t, build(b, start, ext, 32), "a refusal drops the plan")

	require.NoError(t, b.SetExtent(ctx, []uint64{80, 64}))
	assert.False(t, build(b, start, ext, 32), "a new extent")
	assert.True(t, build(b, start, ext, 32))
}

// TestOnePlanReadsFollowTheBlock: reads through the public API by one
// goroutine (so that its scratch, and the plan in it, come back to it)
// alternate between places, shapes, datasets and extents, with a write
// between some of them, and each reads the model's bytes: a kept plan
// never serves a block it was not built for.
func TestOnePlanReadsFollowTheBlock(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	spec := DatasetSpec{Type: Uint16, Shape: []uint64{32, 32}, MaxShape: []uint64{Unlimited, 32}, Chunk: []uint64{8, 8}}
	var dss [2]*Dataset
	var models [2][]byte
	for i := range dss {
		ds, err := f.CreateDataset(ctx, string(rune('a'+i)), spec)
		require.NoError(t, err)
		m := make([]byte, 32*32*2)
		for j := range m {
			m[j] = byte(j*3 + i*101)
		}
		require.NoError(t, ds.Write(ctx, All([]uint64{32, 32}), m))
		dss[i], models[i] = ds, m
	}
	read := func(i int, r0, c0, nr, nc uint64) {
		t.Helper()
		got := make([]byte, nr*nc*2)
		require.NoError(t, dss[i].Read(ctx, Box([]uint64{r0, c0}, []uint64{nr, nc}), got))
		for r := uint64(0); r < nr; r++ {
			for c := uint64(0); c < nc; c++ {
				o := ((r0+r)*32 + c0 + c) * 2
				k := (r*nc + c) * 2
				if got[k] != models[i][o] || got[k+1] != models[i][o+1] {
					t.Fatalf("dataset %d box (%d,%d)+(%d,%d): element (%d,%d) wrong", i, r0, c0, nr, nc, r, c)
				}
			}
		}
	}
	for k := 0; k < 400; k++ {
		i := k % 2
		r0, c0 := uint64(k%4), uint64(k/4%4)
		read(i, r0, c0, 2, 3)
		read(i, r0, c0, 2, 3)
		read(i, r0+8, c0, 2, 3) // another chunk, the same offsets in it
		read(i, r0, c0, 3, 2)
		if k%37 == 0 {
			// New bytes in the chunk the plan names.
			o := (r0*32 + c0) * 2
			models[i][o] ^= 0xff
			require.NoError(t, dss[i].Write(ctx, Box([]uint64{r0, c0}, []uint64{1, 1}), models[i][o:o+2]))
		}
		if k%53 == 0 {
			require.NoError(t, dss[i].SetExtent(ctx, []uint64{32 + uint64(k%3)*8, 32}))
			require.NoError(t, dss[i].SetExtent(ctx, []uint64{32, 32}))
		}
	}
}

// TestSelectionIsSmall: a Selection is passed and returned by value on
// every Read and Write, so it holds its general form by pointer: its size
// is the inline box's arrays and two words, not four slice headers more.
func TestSelectionIsSmall(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Selection{}), uintptr(2*maxInlineRank*8+16))
	// The general form still reads back whole, and a copy shares it.
	sel := Hyperslab([]uint64{1, 2}, []uint64{3, 4}, []uint64{2, 2}, []uint64{1, 2})
	cp := sel
	assert.Equal(t, sel.hyper(), cp.hyper())
	assert.Equal(t, []uint64{2, 4}, cp.Shape())
	var zero Selection
	assert.Empty(t, zero.hyper().Start)
	assert.Empty(t, zero.Shape())
}
