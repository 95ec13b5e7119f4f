package engine

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestCommitFinishesTrimsLeftDuringIt: a shrink whose cache trim fails
// (the edge chunk was dropped after it was prepared and its reload fails)
// leaves its trim pending. When that happens while a commit is writing
// chunks back, the commit's header write finishes the trim and writes the
// trimmed chunk itself: Flush succeeds, and the committed file shows the
// fill value past the shrunk extent when it grows again.
func TestCommitFinishesTrimsLeftDuringIt(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	fd := vfd.NewFault(mem, vfd.Fail(vfd.Every(vfd.OpRead)), vfd.Fail(vfd.Every(vfd.OpReadV)))
	fd.SetEnabled(false)
	f := tCreate(t, fd, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{12, 8}, MaxShape: []uint64{12, 8}, Chunk: []uint64{4, 8}}
	ds, err := f.CreateDataset(ctx, "d", spec)
	must(t, err)
	must(t, ds.Write(ctx, All(spec.Shape), bytes.Repeat([]byte{1}, 96)))
	must(t, f.Flush(ctx))

	failTrim := func() { // drop the prepared chunks and fail their reload
		must(t, ds.Evict(ctx))
		fd.SetEnabled(true)
	}
	var once sync.Once
	var shrinkErr error
	pending := false
	duringCommit := func() {
		once.Do(func() {
			testHookShrinkPrepared.Store(&failTrim)
			shrinkErr = ds.SetExtent(ctx, []uint64{6, 8})
			testHookShrinkPrepared.Store(nil)
			fd.SetEnabled(false)
			pending = ds.s.hasPendingTrims()
		})
	}
	testHookWroteBack.Store(&duringCommit)
	defer testHookWroteBack.Store(nil)
	must(t, ds.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 8}), bytes.Repeat([]byte{2}, 8)))
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("Flush with a trim left pending during it: %v", err)
	}
	must(t, shrinkErr)
	if !pending {
		t.Fatal("precondition: the shrink's trim did not stay pending")
	}
	testHookWroteBack.Store(nil)

	r := tOpen(t, vfd.NewMemFrom(mem.Bytes()), nil)
	rd, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	if got := rd.Shape(); got[0] != 6 {
		t.Fatalf("committed shape %v, want [6 8]", got)
	}
	must(t, rd.SetExtent(ctx, []uint64{12, 8}))
	got := make([]byte, 96)
	must(t, rd.Read(ctx, All([]uint64{12, 8}), got))
	want := append(append(bytes.Repeat([]byte{2}, 8), bytes.Repeat([]byte{1}, 40)...), make([]byte, 48)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after growing back: %v, want %v", got, want)
	}
}
