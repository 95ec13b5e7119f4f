package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// Borrowed write-back images (layout.BorrowingEncoder, denseLayout's
// EncodeBorrowed): an unfiltered chunk is written back from its own buffer,
// so the chunk must not change until the vector write is over.

// writeVHook calls before ahead of every WriteV and checks after it that
// every chunk frame it wrote (an extent of frame bytes) reads back with a
// matching checksum.
type writeVHook struct {
	vfd.Driver
	frame int
	// sum is the dataset's checksum rule; the frames are its chunks
	// [r, 0].
	sum    format.ChunkSum
	before func()
	mu     sync.Mutex
	bad    []int64 // offsets of frames whose checksum did not match
	frames int     // frames checked
}

func (h *writeVHook) WriteV(exts []vfd.Extent) error {
	if h.before != nil {
		h.before()
	}
	if err := h.Driver.WriteV(exts); err != nil {
		return err
	}
	for _, x := range exts {
		if len(x.Buf) != h.frame {
			continue
		}
		b := make([]byte, h.frame)
		if _, err := h.Driver.ReadAt(b, x.Off); err != nil {
			return err
		}
		h.mu.Lock()
		h.frames++
		ok := false
		for r := range uint64(dwRows) {
			_, err := h.sum.VerifyFrame([]uint64{r, 0}, b)
			ok = ok || err == nil
		}
		if !ok {
			h.bad = append(h.bad, x.Off)
		}
		h.mu.Unlock()
	}
	return nil
}

// TestWriteBackBorrowedImage: a writer of a chunk whose borrowed image is
// being written waits until the write is over, so the frame on disk matches
// its checksum, and the writer's bytes reach the file at the next flush.
// Without the latch held through the write, the writer changes the bytes
// under the vector write and the frame's checksum no longer matches.
func TestWriteBackBorrowedImage(t *testing.T) {
	defer verifyNoLeaks(t)
	for _, borrow := range []bool{true, false} {
		t.Run(map[bool]string{true: "borrowed", false: "copied"}[borrow], func(t *testing.T) {
			defer func(b bool) { borrowImages = b }(borrowImages)
			borrowImages = borrow
			ctx := context.Background()
			mem := vfd.NewMem()
			h := &writeVHook{Driver: mem, frame: dwRow + format.ChunkFrameOverhead}
			// DirectWriteBytes -1: whole-chunk writes stay in the cache too.
			f := tCreate(t, h, &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, DirectWriteBytes: -1}})
			ds, err := f.CreateDataset(ctx, "d", dwSpec)
			must(t, err)
			h.sum = ds.s.csum
			ref := newRef(dwSpec.Shape, 1, nil)
			write := func(sel Selection, buf []byte) error {
				err := ds.Write(ctx, sel, buf)
				if err == nil {
					ref.write(sel, buf)
				}
				return err
			}
			left := Box([]uint64{2, 0}, []uint64{1, dwRow / 2})
			right := Box([]uint64{2, dwRow / 2}, []uint64{1, dwRow / 2})
			must(t, write(left, pattern(dwRow/2, 1)))

			// At the flush's first vector write, a second writer changes
			// the chunk being written. It gets 200 ms; a borrowed image
			// must hold it off for all of them.
			var once sync.Once
			done := make(chan error, 1)
			finishedEarly := false
			h.before = func() {
				once.Do(func() {
					go func() { done <- write(right, pattern(dwRow/2, 2)) }()
					select {
					case err := <-done:
						finishedEarly = true
						done <- err
					case <-time.After(200 * time.Millisecond):
					}
				})
			}
			must(t, f.Flush(ctx))
			must(t, <-done)
			h.before = nil
			if borrow && finishedEarly {
				t.Errorf("a writer of the chunk finished while its borrowed image was being written")
			}
			if h.frames == 0 || len(h.bad) > 0 {
				t.Fatalf("%d chunk frames written, %d with a checksum that does not match (at %v)", h.frames, len(h.bad), h.bad)
			}
			ref.verify(t, ds)
			must(t, f.Close(ctx))
			if len(h.bad) > 0 {
				t.Fatalf("frames with a bad checksum at %v", h.bad)
			}
			checkReopen(t, mem, "d", ref)
		})
	}
}
