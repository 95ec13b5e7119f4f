package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// sharedMem lets a reader's driver read a source file a writer keeps open:
// closing it leaves the file to its writer.
type sharedMem struct{ vfd.Driver }

func (sharedMem) Close() error { return nil }

// vfSources are the source files of the virtual read fault sweep, on
// memory drivers, with their writers open.
type vfSources struct {
	t     *testing.T
	ctx   context.Context
	c     *cache.Cache
	mems  map[string]*vfd.Mem
	files map[string]*File
	sets  map[string]*Dataset
}

const vfH, vfW = 3, 4

// add creates file name with n frames of dataset "frames", frame j holding
// frameData(base+j*step).
func (s *vfSources) add(name string, n, base, step uint64) {
	s.t.Helper()
	mem := vfd.NewMem()
	f, err := Create(context.Background(), "", &Options{Driver: mem, Cache: s.c})
	if err != nil {
		s.t.Fatal(err)
	}
	ds, err := f.CreateDataset(context.Background(), "frames", DatasetSpec{Type: Uint32, Shape: []uint64{0, vfH, vfW}, MaxShape: []uint64{Unlimited, vfH, vfW},
		Chunk: []uint64{1, vfH, vfW}, Filters: []Filter{Shuffle(), Deflate(1)}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.mems[name], s.files[name], s.sets[name] = mem, f, ds
	s.append(name, n, base, step)
}

// append adds n frames to file name and commits them.
func (s *vfSources) append(name string, n, base, step uint64) {
	s.t.Helper()
	ds := s.sets[name]
	at := ds.Shape()[0]
	if err := ds.SetExtent(s.ctx, []uint64{at + n, vfH, vfW}); err != nil {
		s.t.Fatal(err)
	}
	for j := uint64(0); j < n; j++ {
		g := base + (at+j)*step
		if err := WriteSlice(s.ctx, ds, Box([]uint64{at + j, 0, 0}, []uint64{1, vfH, vfW}), frameData(g, vfH*vfW)); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := s.files[name].Flush(s.ctx); err != nil {
		s.t.Fatal(err)
	}
}

func (s *vfSources) close() {
	for _, f := range s.files {
		if err := f.Close(context.Background()); err != nil {
			s.t.Fatal(err)
		}
	}
}

// TestVirtualReadFaultEveryOperation fails, one at a time, every I/O
// operation a reader of two virtual datasets makes on their source files
// (a round-robin mapping over two files, and a printf mapping with one
// file per block): opening the virtual file and its datasets, reading,
// refreshing after the writers appended (and a new printf source
// appeared), reading again. Each failed call must return ErrIO naming the
// source whose operation failed — a source that fails is never taken for
// a missing one, never read as fill, never reported corrupt — every call
// that succeeds must return exactly the sources' data, and the same call
// retried once the fault is over must succeed with the right data, on the
// same reader.
func TestVirtualReadFaultEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const rr = 2 // round-robin writers
	for n := int64(0); ; n++ {
		if n > 2000 {
			t.Fatal("no fault-free run after 2000 operations")
		}
		// A small cache, so that its metadata shedder also runs while
		// source files open (a File must be whole before the shared
		// cache can call it).
		c, err := cache.New(cache.Config{QuiescentBytes: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		src := &vfSources{t: t, ctx: ctx, c: c, mems: map[string]*vfd.Mem{}, files: map[string]*File{}, sets: map[string]*Dataset{}}
		for i := 0; i < rr; i++ {
			src.add(fmt.Sprintf("w%d.scc", i), 3, uint64(i), rr) // frame j of writer i is frame j*rr+i
		}
		for k := 0; k < 2; k++ {
			src.add(fmt.Sprintf("p%d.scc", k), 3, 100+3*uint64(k), 1)
		}
		vmem := vfd.NewMem()
		plain := func(ctx context.Context, name string, opts *Options) (*File, error) {
			if mem := src.mems[name]; mem != nil {
				return Open(ctx, "", withDriver(opts, sharedMem{mem}))
			}
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		vf, err := Create(ctx, "", &Options{Driver: vmem, Cache: c, Virtual: VirtualOptions{Open: plain}})
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range []struct {
			name string
			ms   []VirtualMapping
		}{
			{"v", roundRobin(rr, vfH, vfW, false)},
			{"p", []VirtualMapping{{
				Virtual: Hyperslab([]uint64{0, 0, 0}, []uint64{3, 1, 1}, []uint64{Unlimited, 1, 1}, []uint64{3, vfH, vfW}),
				File:    "p%b.scc", Dataset: "frames",
				Source: Box([]uint64{0, 0, 0}, []uint64{3, vfH, vfW}),
			}}},
		} {
			if _, err := vf.CreateVirtualDataset(ctx, spec.name, VirtualSpec{Type: Uint32, Shape: []uint64{0, vfH, vfW}, MaxShape: []uint64{Unlimited, vfH, vfW}, Mappings: spec.ms}); err != nil {
				t.Fatal(err)
			}
		}
		if err := vf.Close(ctx); err != nil {
			t.Fatal(err)
		}

		// Operation n over every source driver the reader opens fails
		// with EIO, once.
		var seen atomic.Int64
		var hitMu sync.Mutex
		var hit string // the file whose operation failed
		open := func(ctx context.Context, name string, opts *Options) (*File, error) {
			mem := src.mems[name]
			if mem == nil {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
			}
			inj := vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
				if seen.Add(1)-1 != n {
					return vfd.Effect{}
				}
				hitMu.Lock()
				hit = name
				hitMu.Unlock()
				return vfd.Effect{Err: fmt.Errorf("%w: %s op %d: %w", vfd.ErrInjected, name, info.Seq, syscall.EIO)}
			})
			return Open(ctx, "", withDriver(opts, vfd.NewFault(sharedMem{mem}, inj)))
		}
		injected := func() bool { return seen.Load() > n }
		faults := 0
		// try runs call; a failure must be the injected fault, reported
		// as ErrIO naming its source, and the call then succeeds.
		try := func(what string, call func() error) {
			t.Helper()
			err := call()
			if err == nil {
				return
			}
			hitMu.Lock()
			name := hit
			hitMu.Unlock()
			switch {
			case !injected() || faults > 0:
				t.Fatalf("op %d: %s: %v, with no fault injected", n, what, err)
			case !errors.Is(err, ErrIO) || !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, syscall.EIO):
				t.Fatalf("op %d: %s: %v, want the injected EIO as ErrIO", n, what, err)
			case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound):
				t.Fatalf("op %d: %s: %v also matches ErrCorrupt or ErrNotFound", n, what, err)
			case !strings.Contains(err.Error(), "source "+name):
				t.Fatalf("op %d: %s: %v does not name source %s", n, what, err, name)
			}
			faults++
			if err := call(); err != nil {
				t.Fatalf("op %d: %s again after the fault: %v", n, what, err)
			}
		}
		var r *File
		try("open", func() (err error) {
			r, err = Open(ctx, "", &Options{Driver: sharedMem{vmem}, Cache: c, ReadOnly: true, Virtual: VirtualOptions{Open: open}})
			return err
		})
		dss := map[string]*Dataset{}
		for _, name := range []string{"v", "p"} {
			try("open "+name, func() (err error) {
				dss[name], err = r.OpenDataset(ctx, name, nil)
				return err
			})
		}
		check := func(name string, frames uint64, val func(g uint64) uint64) {
			t.Helper()
			ds := dss[name]
			if sh := ds.Shape(); sh[0] != frames {
				t.Fatalf("op %d: %s has %d frames, want %d", n, name, sh[0], frames)
			}
			got := make([]uint32, frames*vfH*vfW)
			try("read "+name, func() error { return ReadSlice(ctx, ds, All([]uint64{frames, vfH, vfW}), got) })
			for g := uint64(0); g < frames; g++ {
				for e := uint64(0); e < vfH*vfW; e++ {
					if x, want := got[g*vfH*vfW+e], frameVal(val(g), e); x != want {
						t.Fatalf("op %d: %s frame %d element %d = %#x, want %#x", n, name, g, e, x, want)
					}
				}
			}
		}
		id := func(g uint64) uint64 { return g }
		pval := func(g uint64) uint64 { return 100 + g }
		check("v", 3*rr, id)
		check("p", 6, pval)
		// The writers append a frame each, and a third printf source
		// appears.
		for i := 0; i < rr; i++ {
			src.append(fmt.Sprintf("w%d.scc", i), 1, uint64(i), rr)
		}
		src.add("p2.scc", 3, 106, 1)
		// A source that fails while refreshed is let go and opened
		// again by the next look (virtualSources): the Refresh itself
		// absorbs the fault, and the reads below prove the recovery.
		wasInjected := injected()
		try("refresh", func() error { return r.Refresh(ctx) })
		absorbed := !wasInjected && injected() && faults == 0
		if absorbed {
			// A virtual dataset whose evaluation met the fault keeps
			// its last extent until an evaluation succeeds: the next.
			try("refresh again", func() error { return r.Refresh(ctx) })
		}
		check("v", 4*rr, id)
		check("p", 9, pval)
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		src.close()
		c.Close()
		if !injected() {
			t.Logf("%d source operations failed one by one", n)
			return
		}
		if faults == 0 && !absorbed {
			t.Fatalf("op %d failed (%s) but no call returned an error", n, hit)
		}
	}
}
