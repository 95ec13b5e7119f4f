package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// TestRefreshDropsDetachedChunks: a read-only File whose dataset handle was
// closed keeps the chunks cached for a warm reopen; a Refresh that adopts a
// newer header must drop them, or the reopened dataset reads the old state.
func TestRefreshDropsDetachedChunks(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	w := tCreate(t, mem, nil)
	ds, err := w.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{1, 1, 1, 1}))
	must(w.Flush(ctx))
	r := tOpen(t, mem, &Options{ReadOnly: true})
	rd, err := r.OpenDataset(ctx, "a", nil)
	must(err)
	buf := make([]byte, 4)
	must(rd.Read(ctx, Box([]uint64{0}, []uint64{4}), buf))
	must(rd.Close(ctx))
	must(ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{2, 2, 2, 2}))
	must(w.Flush(ctx))
	must(r.Refresh(ctx))
	rd, err = r.OpenDataset(ctx, "a", nil)
	must(err)
	must(rd.Read(ctx, Box([]uint64{0}, []uint64{4}), buf))
	if buf[0] != 2 {
		t.Fatalf("stale read after refresh: %v", buf)
	}
}

// TestRefreshWaitsForLastClose: a Refresh that adopts a newer header while
// the last handle's Close is still unregistering the dataset waits for it,
// as a reopen does, rather than registering the id a second time
// (cache.ErrExists).
func TestRefreshWaitsForLastClose(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	w := tCreate(t, mem, nil)
	ds, err := w.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	require.NoError(t, ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{1, 1, 1, 1}))
	require.NoError(t, w.Flush(ctx))
	r := tOpen(t, mem, &Options{ReadOnly: true})
	rd, err := r.OpenDataset(ctx, "a", nil)
	require.NoError(t, err)
	buf := make([]byte, 4)
	require.NoError(t, rd.Read(ctx, Box([]uint64{0}, []uint64{4}), buf))
	require.NoError(t, ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{2, 2, 2, 2}))
	require.NoError(t, w.Flush(ctx))

	refreshed := make(chan error, 1)
	hook := func() {
		// The Close has detached the registration: a Refresh now must
		// wait for it. Give it the time to get there; it either waits
		// (and finishes after this hook) or fails at once.
		go func() { refreshed <- r.Refresh(ctx) }()
		select {
		case err := <-refreshed:
			refreshed <- err
		case <-time.After(200 * time.Millisecond):
		}
	}
	testHookCloseUnregister.Store(&hook)
	defer testHookCloseUnregister.Store(nil)
	require.NoError(t, rd.Close(ctx))
	testHookCloseUnregister.Store(nil)
	assert.NoError(t, <-refreshed)
	rd, err = r.OpenDataset(ctx, "a", nil)
	require.NoError(t, err)
	require.NoError(t, rd.Read(ctx, Box([]uint64{0}, []uint64{4}), buf))
	assert.Equal(t, []byte{2, 2, 2, 2}, buf)
}
