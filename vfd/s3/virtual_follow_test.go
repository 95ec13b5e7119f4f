package s3_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/vfd/s3"
)

// vFrameVal is the value of element e of frame g of the virtual dataset.
func vFrameVal(g, e uint64) uint32 { return uint32(g)<<8 | uint32(e%251) | 1<<31 }

func vFrame(g, elems uint64) []byte {
	b := make([]byte, 0, elems*4)
	for e := range elems {
		b = binary.LittleEndian.AppendUint32(b, vFrameVal(g, e))
	}
	return b
}

// openS3Source is VirtualOptions.Open for s3:// sources on the test
// server: a source that does not exist is engine.ErrNotFound (read as
// fill), any other failure is the caller's.
func openS3Source(ctx context.Context, name string, opts *engine.Options) (*engine.File, error) {
	o := s3.TestOpts("")
	o.ReadOnly = true
	o.PageSize = 64 << 10
	d, err := s3.Open(ctx, name, &o)
	if errors.Is(err, s3.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", engine.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	f, err := engine.Open(ctx, "", testfile.WithDriver(opts, d))
	if err != nil {
		d.Close()
		return nil, err
	}
	return f, nil
}

// TestVirtualFollowS3Race: writers append frames round-robin, each to its
// own file on the S3 server, flushing at random moments; a reader of a
// virtual dataset (itself in a file on the server) whose s3:// sources
// open through VirtualOptions.Open loops Refresh+Read and checks every
// frame it sees: a frame a writer had acknowledged before the Refresh
// reads exactly, a frame no writer had begun by the end of the Read reads
// as fill, one in between reads whole one way or the other, and the
// extent reaches at least the acknowledged frames. ErrStale (a page
// replaced under the reader) is retried with a Refresh; any other error,
// ErrCorrupt above all, fails the test. SCC_STRESS=long runs it longer.
func TestVirtualFollowS3Race(t *testing.T) {
	ctx := context.Background()
	const nw, h, w = 3, 4, 8
	const elems = h * w
	perWriter := 30
	if os.Getenv("SCC_STRESS") == "long" {
		perWriter = 150
	}
	prefix := s3.TestKey(t)
	url := func(name string) string { return "s3://" + s3.TestBucket + "/" + prefix + "/" + name }
	fspec := engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{0, h, w}, MaxShape: []uint64{engine.Unlimited, h, w},
		Chunk: []uint64{1, h, w}, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}}
	writers := make([]*engine.File, nw)
	dss := make([]*engine.Dataset, nw)
	for i := range writers {
		d := mustDrv(t, prefix+fmt.Sprintf("/w%d.scc", i), "", create)
		f, err := engine.Create(ctx, "", &engine.Options{Driver: d})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := f.CreateDataset(ctx, "frames", fspec)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		writers[i], dss[i] = f, ds
	}
	// Frame g of the virtual dataset is frame g/nw of writer g%nw.
	var maps []engine.VirtualMapping
	for i := 0; i < nw; i++ {
		maps = append(maps, engine.VirtualMapping{
			Virtual: engine.Hyperslab([]uint64{uint64(i), 0, 0}, []uint64{nw, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, h, w}),
			File:    url(fmt.Sprintf("w%d.scc", i)),
			Dataset: "frames",
			Source:  engine.Hyperslab([]uint64{0, 0, 0}, nil, []uint64{engine.Unlimited, 1, 1}, []uint64{1, h, w}),
		})
	}
	vd := mustDrv(t, prefix+"/v.scc", "", create)
	vf, err := engine.Create(ctx, "", &engine.Options{Driver: vd, Virtual: engine.VirtualOptions{Open: openS3Source}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vf.CreateVirtualDataset(ctx, "v", engine.VirtualSpec{Type: engine.Uint32, Shape: []uint64{0, h, w},
		MaxShape: []uint64{engine.Unlimited, h, w}, Mappings: maps}); err != nil {
		t.Fatal(err)
	}
	if err := vf.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// acked[i]: frames of writer i a Flush has acknowledged; started[i]:
	// frames whose extent change has begun.
	var acked, started [nw]atomic.Int64
	var failed atomic.Bool // a writer failed: the reader stops
	rd := mustDrv(t, prefix+"/v.scc", "", readOnly)
	var wg sync.WaitGroup
	readerUp := make(chan struct{}) // writers start once the reader follows
	errs := make(chan error, nw+1)
	for i := 0; i < nw; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				failed.Store(true)
				errs <- fmt.Errorf("writer %d: %w", i, err)
			}
			<-readerUp
			rng := rand.New(rand.NewPCG(uint64(i), 32))
			ds := dss[i]
			for j := 0; j < perWriter; j++ {
				started[i].Store(int64(j + 1))
				if err := ds.SetExtent(ctx, []uint64{uint64(j + 1), h, w}); err != nil {
					fail(err)
					return
				}
				g := uint64(j*nw + i)
				if err := ds.Write(ctx, engine.Box([]uint64{uint64(j), 0, 0}, []uint64{1, h, w}), vFrame(g, elems)); err != nil {
					fail(err)
					return
				}
				if rng.IntN(3) == 0 || j == perWriter-1 {
					if err := writers[i].Flush(ctx); err != nil {
						fail(err)
						return
					}
					acked[i].Store(int64(j + 1))
				}
			}
		}()
	}
	var stale, rounds int
	wg.Add(1)
	go func() {
		defer wg.Done()
		up := sync.OnceFunc(func() { close(readerUp) })
		defer up()
		r, err := engine.Open(ctx, "", &engine.Options{Driver: rd, ReadOnly: true, Virtual: engine.VirtualOptions{Open: openS3Source}})
		if err != nil {
			errs <- err
			return
		}
		defer r.Close(ctx)
		v, err := r.OpenDataset(ctx, "v", nil)
		if err != nil {
			errs <- err
			return
		}
		up()
		for staleRun := 0; !failed.Load(); {
			var before [nw]int64
			done := true
			for i := range before {
				before[i] = acked[i].Load()
				done = done && before[i] == int64(perWriter)
			}
			err := r.Refresh(ctx)
			var buf []byte
			var n uint64
			if err == nil {
				n = v.Shape()[0]
				buf = make([]byte, n*elems*4)
				err = v.Read(ctx, engine.Box([]uint64{0, 0, 0}, []uint64{n, h, w}), buf)
			}
			if errors.Is(err, engine.ErrStale) {
				// A writer replaced a page the reader was about to
				// read: the next Refresh sees the newer commit.
				stale++
				if staleRun++; staleRun > 1000 {
					errs <- fmt.Errorf("round %d: stale 1000 times in a row: %w", rounds, err)
					return
				}
				continue
			}
			staleRun = 0
			if err != nil {
				errs <- fmt.Errorf("round %d: %w", rounds, err)
				return
			}
			rounds++
			var after [nw]int64
			for i := range after {
				after[i] = started[i].Load()
			}
			var need uint64
			for i := range before {
				if before[i] > 0 {
					need = max(need, uint64(before[i]-1)*nw+uint64(i)+1)
				}
			}
			if n < need {
				errs <- fmt.Errorf("round %d: %d frames, but %d were acknowledged", rounds, n, need)
				return
			}
			for g := uint64(0); g < n; g++ {
				i, j := g%nw, int64(g/nw)
				got := buf[g*elems*4 : (g+1)*elems*4]
				want := vFrame(g, elems)
				data, fill := string(got) == string(want), string(got) == string(make([]byte, len(got)))
				switch {
				case j < before[i] && !data:
					errs <- fmt.Errorf("round %d: frame %d (writer %d frame %d, acknowledged) reads wrong", rounds, g, i, j)
					return
				case j >= after[i] && !fill:
					errs <- fmt.Errorf("round %d: frame %d (writer %d frame %d, not begun) is not fill", rounds, g, i, j)
					return
				case !data && !fill:
					errs <- fmt.Errorf("round %d: frame %d (writer %d frame %d) is neither its data nor fill", rounds, g, i, j)
					return
				}
			}
			if done {
				if n != uint64(nw*perWriter) {
					errs <- fmt.Errorf("every frame acknowledged, the reader sees %d of %d", n, nw*perWriter)
				}
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, f := range writers {
		if err := f.Close(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d reader rounds, %d stale retries", rounds, stale)
}
