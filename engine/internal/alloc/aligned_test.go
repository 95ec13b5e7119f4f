package alloc

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AllocAligned hands out aligned offsets: at the end of the file past an
// unaligned EOF (the skipped bytes stay free and a small Alloc takes
// them), and from a free extent with room at an aligned offset inside it.
func TestAllocAligned(t *testing.T) {
	a := New(ds, ds)
	x := mustAlloc(t, a, 26)
	off, err := a.AllocAligned(1<<20+4, 4096)
	require.NoError(t, err)
	assert.Equal(t, int64(ds+4096), off, "first aligned offset past EOF %d", x+26)
	assert.Equal(t, off+1<<20+4, a.EOF())
	assert.Equal(t, []Extent{{ds + 26, 4096 - 26}}, a.FreeExtents(), "the bytes skipped stay free")
	mustCheck(t, a)

	small := mustAlloc(t, a, 100)
	assert.Equal(t, int64(ds+26), small, "a small block takes the skipped bytes")

	// A free extent with room at an aligned offset inside it: that offset,
	// the bytes on either side left free.
	b := New(ds+100, ds+100)
	h := mustAlloc(t, b, 3*4096)
	mustAlloc(t, b, 10) // keeps the hole from being the free tail
	b.Free(h, 3*4096)
	z, err := b.AllocAligned(4096, 4096)
	require.NoError(t, err)
	assert.Equal(t, int64(3*4096), z)
	assert.Equal(t, []Extent{{h, z - h}, {z + 4096, h + 3*4096 - z - 4096}}, b.FreeExtents())
	mustCheck(t, b)

	_, err = a.AllocAligned(10, 3)
	assert.True(t, errors.Is(err, ErrInvalid), "alignment not a power of two: %v", err)
	_, err = a.AllocAligned(0, 4096)
	assert.True(t, errors.Is(err, ErrInvalid), "empty allocation: %v", err)
	_, err = a.AllocAligned(math.MaxInt64-10, 4096)
	assert.True(t, errors.Is(err, ErrNoSpace), "past the address space: %v", err)
	mustCheck(t, a)
}

// Aligned and unaligned allocations and frees in any order keep the
// allocator's invariants, never hand out a byte twice, and every aligned
// offset is aligned.
func TestAllocAlignedMixed(t *testing.T) {
	a := New(ds, ds)
	r := rand.New(rand.NewPCG(1, 2))
	type blk struct{ off, size int64 }
	var live []blk
	for i := range 4000 {
		if len(live) > 0 && r.IntN(3) == 0 {
			j := r.IntN(len(live))
			b := live[j]
			live = append(live[:j], live[j+1:]...)
			a.Free(b.off, b.size)
			continue
		}
		size := 1 + r.Int64N(20000)
		var off int64
		var err error
		if r.IntN(2) == 0 {
			off, err = a.AllocAligned(size, 4096)
			require.NoError(t, err)
			require.Zero(t, off%4096, "step %d", i)
		} else {
			off, err = a.Alloc(size)
			require.NoError(t, err)
		}
		live = append(live, blk{off, size})
		if i%500 == 0 {
			a.Commit()
		}
	}
	mustCheck(t, a)
	// No two live blocks overlap.
	for i := range live {
		for j := i + 1; j < len(live); j++ {
			p, q := live[i], live[j]
			require.False(t, p.off < q.off+q.size && q.off < p.off+p.size, "%v and %v overlap", p, q)
		}
	}
}
