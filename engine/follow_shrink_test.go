package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestFollowReadShrunkUnder: a follower's read of a selection inside the
// extent it holds meets space the writer reused after shrinking the
// dataset; the read's retry refreshes to the writer's smaller extent, where
// the selection no longer fits. The selection was valid when the call
// started, so the read must not report ErrOutOfRange (a caller's mistake)
// but ErrStale, saying the extent shrank under it.
func TestFollowReadShrunkUnder(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	mem := vfd.NewMem()
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, MaxShape: []uint64{Unlimited, 64}, Chunk: []uint64{16, 16}}
	w := tCreate(t, mem, nil)
	ds, err := w.CreateDataset(ctx, "d", spec)
	must(t, err)
	must(t, ds.Write(ctx, All(spec.Shape), randomBytes(rng, 64*64)))
	must(t, w.Close(ctx))
	r := tOpen(t, mem, &Options{ReadOnly: true})
	rds, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	old, err := rds.ChunkExtents(ctx)
	must(t, err)
	// The writer shrinks the dataset to 16 rows and rewrites them; the
	// old frames are then free, and reused (as TestReaderOvertakenByReuse
	// does) by writing garbage with a valid frame checksum over them.
	w = tOpen(t, mem, nil)
	wds, err := w.OpenDataset(ctx, "d", nil)
	must(t, err)
	must(t, wds.SetExtent(ctx, []uint64{16, 64}))
	must(t, wds.Write(ctx, All([]uint64{16, 64}), randomBytes(rng, 16*64)))
	must(t, w.Close(ctx))
	for _, e := range old {
		img := randomBytes(rng, int(e.Size)-4)
		if _, err := mem.WriteAt(format.AppendChunkChecksum(img), e.Off); err != nil {
			t.Fatal(err)
		}
	}
	if sh := rds.Shape(); sh[0] != 64 {
		t.Fatalf("the follower holds extent %v before the read, want 64 rows", sh)
	}
	err = rds.Read(ctx, All([]uint64{64, 64}), make([]byte, 64*64))
	if errors.Is(err, ErrOutOfRange) || !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("a read valid when it started, whose retry met a smaller extent: %v, want ErrStale saying the extent shrank", err)
	}
	// A new read at the new extent is fine.
	must(t, rds.Read(ctx, All([]uint64{16, 64}), make([]byte, 16*64)))
}
