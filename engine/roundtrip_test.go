package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/vfd"
)

// roundTrip reads every chunk of src from goroutines goroutines, each
// into a buffer of its own, and writes it whole to dst, as a copy of one
// dataset into another does (scctl bench zarrbench's "roundtrip" row).
func roundTrip(ctx context.Context, src, dst *Dataset, chunks, goroutines int, box func(k int) Selection, chunkBytes int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunkBytes)
			for {
				k := int(next.Add(1) - 1)
				if k >= chunks {
					return
				}
				if err := src.Read(ctx, box(k), buf); err != nil {
					errs <- err
					return
				}
				if err := dst.Write(ctx, box(k), buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestRoundTripMemoryBound holds the memory bound of a round trip
// (cache/directwrite_encode.go): a shuffle+zstd dataset four times the
// cache's quiescent size is read chunk by chunk and written to another
// by four goroutines through one cache with two workers. The cache's
// memory, its peak resident bytes plus its peak of images in flight
// (Stats.EncodingBytes), stays within
//
//	Q + P + max(R×(C+E) + W×E, ⌈(A/8)/C⌉×E)
//
// (Q quiescent limit, P pre-encode cap, R goroutines, C chunk in memory,
// W workers, E an image's buffer, A the active limit; the second term is
// the Flush that ends the copy, which writes the dirty chunks in rounds),
// which is well under the active limit the dirty whole chunks used to pile
// up to. (The images read for direct decodes, R×E of the bound, are not in
// Stats: the check holds the rest of it.) Every value of the copy is
// checked after reopening it.
func TestRoundTripMemoryBound(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const (
		n, rows, cols = 64, 256, 256 // 64 chunks of 128 KiB
		chunkBytes    = rows * cols * 2
		goroutines    = 4
		workers       = 2
	)
	shape := []uint64{n, rows, cols}
	spec := DatasetSpec{Type: Uint16, Shape: shape, Chunk: []uint64{1, rows, cols}, Filters: []Filter{Shuffle(), Zstd(1)}}
	box := func(k int) Selection { return Box([]uint64{uint64(k), 0, 0}, []uint64{1, rows, cols}) }
	srcDrv, dstDrv := vfd.NewMem(), vfd.NewMem()
	f := tCreate(t, srcDrv, nil)
	ds, err := f.CreateDataset(ctx, "a", spec)
	must(t, err)
	data := compressibleBytes(rand.New(rand.NewPCG(30, 1)), n*chunkBytes)
	must(t, ds.Write(ctx, All(shape), data))
	must(t, f.Close(ctx))

	c, err := cache.New(cache.Config{QuiescentBytes: n / 4 * chunkBytes, Workers: workers})
	must(t, err)
	defer c.Close()
	in := tOpen(t, srcDrv, &Options{Cache: c, ReadOnly: true})
	src, err := in.OpenDataset(ctx, "a", nil)
	must(t, err)
	out := tCreate(t, dstDrv, &Options{Cache: c})
	dst, err := out.CreateDataset(ctx, "a", spec)
	must(t, err)
	must(t, roundTrip(ctx, src, dst, n, goroutines, box, chunkBytes))
	must(t, out.Flush(ctx))
	st := c.Stats()
	must(t, in.Close(ctx))
	must(t, out.Close(ctx))

	q, a := st.QuiescentLimit, st.ActiveLimit
	p := q / 8 // Config.PreEncodeBytes's default
	cb := int64(bufpool.Cap(chunkBytes))
	eb := int64(bufpool.Cap(chunkBytes + format.ChunkFrameOverhead)) // zstd skipped when it does not shrink: at most the chunk
	stream := goroutines*(cb+eb) + workers*eb
	flush := (a/8 + cb - 1) / cb * eb
	bound := q + p + max(stream, flush)
	peak := st.PeakResidentBytes + st.PeakEncodingBytes
	t.Logf("peak resident %d + peak in flight %d = %d; bound %d (Q %d, P %d, stream %d, flush %d); active limit %d; %d direct encodes, %d evictions",
		st.PeakResidentBytes, st.PeakEncodingBytes, peak, bound, q, p, stream, flush, a, st.DirectEncodes, st.Evictions)
	if peak > bound {
		t.Fatalf("peak memory %d bytes (resident %d, images in flight %d) over the bound %d", peak, st.PeakResidentBytes, st.PeakEncodingBytes, bound)
	}
	if st.DirectEncodes == 0 {
		t.Fatal("no chunk was encoded from the caller's buffer")
	}
	if st.PeakEncodingBytes > max(workers*eb, flush) {
		t.Fatalf("%d bytes of images in flight at once, over %d workers' images (%d) and a flush round's (%d)", st.PeakEncodingBytes, workers, workers*eb, flush)
	}

	g := tOpen(t, dstDrv, &Options{ReadOnly: true})
	defer g.Close(ctx)
	back, err := g.OpenDataset(ctx, "a", nil)
	must(t, err)
	got := make([]byte, len(data))
	must(t, back.Read(ctx, All(shape), got))
	if !bytes.Equal(got, data) {
		t.Fatal("the copy read back after reopening differs from the source")
	}
}
