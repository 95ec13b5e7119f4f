package engine

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// rowsDriver wraps a driver: its vector reads of at least a chunk's
// bytes (directMin: a chunk read by rows, or a load; the file's own reads
// of its index are smaller) can be made to fail, or to wait until meet of
// them run at once.
type rowsDriver struct {
	vfd.Driver
	fail    atomic.Bool
	meet    int64
	running atomic.Int64
	once    sync.Once
	met     chan struct{}
	meets   atomic.Int64
}

var errRowsNeverMet = errors.New("test: reads of several chunks never ran at once")

func (d *rowsDriver) ReadV(exts []vfd.Extent) error {
	var n int
	for _, x := range exts {
		n += len(x.Buf)
	}
	if n < directMin {
		return d.Driver.ReadV(exts)
	}
	if d.fail.Load() {
		return vfd.ErrInjected
	}
	if d.meet > 1 {
		defer d.running.Add(-1)
		if d.running.Add(1) >= d.meet {
			d.once.Do(func() { close(d.met) })
		}
		t := time.NewTimer(30 * time.Second) // a bound against a hang, not a speed assertion
		defer t.Stop()
		select {
		case <-d.met:
			d.meets.Add(1)
		case <-t.C:
			return errRowsNeverMet
		}
	}
	return d.Driver.ReadV(exts)
}

// TestDirectReadByRows: a read of whole unfiltered chunks whose bytes are
// rows of the caller's buffer (a read of a whole 3-D array cut in cubes,
// or of a box of whole chunks inside it) reads those rows straight into
// the buffer: the model's bytes, nothing loaded or made resident, the
// chunks read on several workers at once. A damaged byte fails it with
// ErrCorrupt, a failed vector read with ErrIO.
func TestDirectReadByRows(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		shape, chunk []uint64
	}{
		{"cubes", []uint64{64, 64, 128}, []uint64{32, 32, 64}},  // rows of 128 B, read with the image and copied
		{"folded", []uint64{64, 64, 128}, []uint64{32, 8, 128}}, // the last dimension folds: rows of 2 KiB
		{"rank 2", []uint64{256, 1024}, []uint64{128, 256}},     // rows of 512 B
		{"long rows", []uint64{64, 8192}, []uint64{8, 4096}},    // rows of 8 KiB: one iovec each, straight in
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfd.NewMem()
			f := tCreate(t, mem, nil)
			ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: tc.shape, Chunk: tc.chunk})
			must(t, err)
			n := uint64(2)
			for _, s := range tc.shape {
				n *= s
			}
			want := make([]byte, n)
			for i := range want {
				want[i] = byte(i*131 + i>>9)
			}
			must(t, ds.Write(ctx, All(tc.shape), want))
			must(t, f.Close(ctx))

			drv := &rowsDriver{Driver: mem, meet: 2, met: make(chan struct{})}
			f, err = Open(ctx, "", &Options{Driver: drv, CacheConfig: cache.Config{QuiescentBytes: 64 << 20, Workers: 4}})
			must(t, err)
			ds, err = f.OpenDataset(ctx, "d", nil)
			must(t, err)
			got := make([]byte, n)
			must(t, ds.Read(ctx, All(tc.shape), got))
			if !bytes.Equal(got, want) {
				t.Fatal("read by rows: wrong bytes")
			}
			if st := f.Cache().Stats(); st.Loads != 0 || st.Chunks != 0 {
				t.Fatalf("%d loads, %d chunks resident; want 0 and 0", st.Loads, st.Chunks)
			}
			if drv.meets.Load() == 0 {
				t.Fatal("the chunks' rows were never read on two workers at once")
			}
			// A box of whole chunks inside the array, off its origin: its
			// chunks' rows land at an offset of the box's buffer.
			drv.meet = 0
			start, count := make([]uint64, len(tc.shape)), make([]uint64, len(tc.shape))
			for d := range tc.shape {
				if tc.chunk[d] < tc.shape[d] {
					start[d] = tc.chunk[d]
				}
				count[d] = tc.shape[d] - start[d]
			}
			box := make([]byte, 2*prod64(count))
			must(t, ds.Read(ctx, Box(start, count), box))
			if !bytes.Equal(box, boxOf(want, tc.shape, start, count)) {
				t.Fatal("box read by rows: wrong bytes")
			}
			if st := f.Cache().Stats(); st.Loads != 0 || st.Chunks != 0 {
				t.Fatalf("box: %d loads, %d chunks resident; want 0 and 0", st.Loads, st.Chunks)
			}
			// An I/O error is ErrIO, not corruption.
			drv.fail.Store(true)
			if err := ds.Read(ctx, All(tc.shape), got); !errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("failed vector read: %v, want ErrIO", err)
			}
			drv.fail.Store(false)
			must(t, f.Close(ctx))

			// One damaged byte in one row of the last chunk: ErrCorrupt.
			img := mem.Bytes()
			row := want[len(want)-int(2*tc.chunk[len(tc.chunk)-1]):]
			k := bytes.LastIndex(img, row)
			if k < 0 {
				t.Fatal("the last row not found in the file")
			}
			img[k+3] ^= 0x40
			f, err = Open(ctx, "", &Options{Driver: vfd.NewMemFrom(img), CacheConfig: cache.Config{QuiescentBytes: 64 << 20, Workers: 4}})
			must(t, err)
			ds, err = f.OpenDataset(ctx, "d", nil)
			must(t, err)
			if err := ds.Read(ctx, All(tc.shape), got); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damaged row: %v, want ErrCorrupt", err)
			}
			must(t, f.Close(ctx))
		})
	}
}

// boxOf returns the packed bytes of the box (start, count) of a C-order
// uint16 array of the given shape.
func boxOf(a []byte, shape, start, count []uint64) []byte {
	var out []byte
	r := len(shape)
	idx := make([]uint64, r)
	for {
		off := uint64(0)
		for d := 0; d < r; d++ {
			off = off*shape[d] + start[d] + idx[d]
		}
		out = append(out, a[2*off:2*off+2]...)
		d := r - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return out
		}
	}
}

// TestDirectReadByRowsConcurrent: many goroutines read boxes of whole
// chunks by rows at once, through one cache's workers, beside readers of
// parts of chunks (the cached path): every read returns the model's bytes.
func TestDirectReadByRowsConcurrent(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	shape, chunk := []uint64{64, 64, 128}, []uint64{16, 32, 64} // 64 KiB chunks, rows of 128 B
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: shape, Chunk: chunk})
	must(t, err)
	want := make([]byte, 2*prod64(shape))
	for i := range want {
		want[i] = byte(i*29 + i>>11)
	}
	must(t, ds.Write(ctx, All(shape), want))
	must(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem, CacheConfig: cache.Config{QuiescentBytes: 64 << 20, Workers: 4}})
	must(t, err)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				start, count := make([]uint64, 3), make([]uint64, 3)
				for d := range shape {
					grid := shape[d] / chunk[d]
					lo := uint64(g+k*(d+1)) % grid
					hi := lo + 1 + uint64(k+d)%(grid-lo)
					start[d], count[d] = lo*chunk[d], (hi-lo)*chunk[d]
				}
				if g%4 == 3 { // part of a chunk: the cached path beside
					count[2] = chunk[2] / 2
				}
				got := make([]byte, 2*prod64(count))
				if err := ds.Read(ctx, Box(start, count), got); err != nil {
					t.Errorf("reader %d: %v", g, err)
					return
				}
				if !bytes.Equal(got, boxOf(want, shape, start, count)) {
					t.Errorf("reader %d: box %v+%v: wrong bytes", g, start, count)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
