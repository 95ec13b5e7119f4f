package engine

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestByteFlipSweep flips every byte of a small file, one at a time, and
// requires each flip to give ErrCorrupt (at open or at read) or to leave every
// value unchanged: never wrong data, never a panic.
//
// One flip is neither: a flip inside the newest superblock slot makes Open
// fall back to the previous generation (exactly what a torn superblock write
// needs). The test requires that the fallback is visible — the generation
// drops — and that the older state then reads correctly (its datasets are
// missing here, since the previous commit was the empty file).
func TestByteFlipSweep(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	rng := rand.New(rand.NewPCG(3, 3))
	specs := map[string]DatasetSpec{
		"z": {Type: Uint16, Shape: []uint64{12, 12}, MaxShape: []uint64{Unlimited, 12}, Chunk: []uint64{6, 6}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"r": {Type: Int32, Shape: []uint64{8, 8}, Chunk: []uint64{4, 8}, Fill: []byte{5, 0, 0, 0}},
	}
	want := map[string][]byte{}
	for n, s := range specs {
		ds, err := f.CreateDataset(ctx, n, s)
		must(t, err)
		all := All(s.Shape)
		buf := compressibleBytes(rng, int(all.NumElements())*s.Type.Size())
		if n == "r" {
			buf = randomBytes(rng, len(buf))
		}
		must(t, ds.Write(ctx, all, buf))
		want[n] = buf
	}
	must(t, f.Close(ctx))
	good := mem.Bytes()
	goodGen := uint64(2)

	flips, corrupt, unchanged, fellBack := 0, 0, 0, 0
	for off := 0; off < len(good); off++ {
		// Bytes in the gaps between the superblock slots and the data area
		// are never read; skip them to keep the sweep short.
		if (off >= format.SlotA+format.SlotSize && off < format.SlotB) || (off >= format.SlotB+format.SlotSize && off < format.DataStart) {
			continue
		}
		img := bytes.Clone(good)
		img[off] ^= 0x5A
		flips++
		outcome := readAllAfterFlip(ctx, img, want)
		switch {
		case errors.Is(outcome.err, ErrCorrupt):
			corrupt++
		case outcome.err != nil:
			t.Fatalf("flip at %d: error %v does not match ErrCorrupt", off, outcome.err)
		case outcome.gen < goodGen:
			fellBack++
			if outcome.datasets != 0 {
				t.Fatalf("flip at %d: fell back to generation %d but still sees %d datasets", off, outcome.gen, outcome.datasets)
			}
		case !outcome.same:
			t.Fatalf("flip at %d: wrong data with no error", off)
		default:
			unchanged++
		}
	}
	t.Logf("%d flips over %d bytes: %d ErrCorrupt, %d unchanged, %d fell back to the previous superblock", flips, len(good), corrupt, unchanged, fellBack)
	if corrupt == 0 {
		t.Fatal("no flip was detected")
	}
}

type flipOutcome struct {
	err      error
	gen      uint64
	datasets int
	same     bool
}

func readAllAfterFlip(ctx context.Context, img []byte, want map[string][]byte) (o flipOutcome) {
	mem := vfd.NewMem()
	if _, err := mem.WriteAt(img, 0); err != nil {
		return flipOutcome{err: err}
	}
	f, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 1 << 20}})
	if err != nil {
		return flipOutcome{err: err}
	}
	defer f.Close(ctx)
	o.gen = f.Generation()
	o.datasets = len(f.datasetNames())
	o.same = true
	for n, w := range want {
		ds, err := f.OpenDataset(ctx, n, nil)
		if err != nil {
			if errors.Is(err, ErrNotFound) && o.gen < 2 {
				continue
			}
			o.err = err
			return o
		}
		buf := make([]byte, len(w))
		if err := ds.Read(ctx, All(ds.Shape()), buf); err != nil {
			o.err = err
			return o
		}
		if !bytes.Equal(buf, w) {
			o.same = false
		}
	}
	return o
}
