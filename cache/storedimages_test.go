package cache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache/layout"
)

// A request that waits for room must not miss a stored image released
// between its eviction (which found every image referenced) and its
// registration as a waiter: such a release signals nobody, so the waiter's
// last look covers the stored images. Without it the request slept until
// some other release, and raw readers that all waited so hung for good
// (engine TestReadChunkRawSharedBounded, once in a CI run).
func TestReserveSeesStoredImageReleasedBeforeWait(t *testing.T) {
	w := newEnv(t, Config{})
	d0, l := w.dataset(1, -1, 64, 64) // 4 KiB chunks
	for k := range uint64(2) {
		must(t, w.c.Write(bg, []Request{fullReq(d0, l, pattern(64*64, byte(k)), k, 0)}))
	}
	must(t, w.f.Flush(bg))
	must(t, w.f.Unregister(bg))
	must(t, w.c.Close())
	// A fresh cache whose active limit holds one image and not two.
	e := &env{t: t, c: newTestCache(t, Config{QuiescentBytes: 4096, ActiveMultiplier: 2, MinBytes: -1}), drv: w.drv}
	var err error
	e.f, err = e.c.RegisterFile(e.drv)
	require.NoError(t, err)
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{MinBytes: -1})
	require.NoError(t, err)
	im0, _, err := d.ReadStored(bg, layout.Coord{0, 0}, nil)
	require.NoError(t, err)
	require.NotNil(t, im0)
	released := false
	testHookNothingEvicted = func() {
		if !released {
			released = true
			im0.Release()
		}
	}
	defer func() { testHookNothingEvicted = nil }()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	im1, _, err := d.ReadStored(ctx, layout.Coord{1, 0}, nil)
	require.NoError(t, err, "the read that needed the released image's room")
	assert.True(t, released, "the hook ran: the read found nothing to evict first")
	assert.Equal(t, pattern(64*64, 1), im1.Bytes()[6:])
	im1.Release()
	must(t, e.f.Unregister(bg))
}
