package cache

import (
	"bytes"
	"context"
	"sync"
	"testing"
)

// TestResidentManyChunkReadRunsInParallel: a read of many resident chunks
// (ServeResident, and Read's own hit step) copies out of its chunks on the
// workers at once, serves every request, and moves the right bytes; a
// read of one resident chunk stays on the caller's goroutine.
func TestResidentManyChunkReadRunsInParallel(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, Workers: 4})
	fl := newFakeLayout(&e.alloc, 64<<10)
	l := newMeetLayout(fl, 3)
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	cb := int(fl.chunkBytes())
	want := pattern(n*cb, 9)
	reqs := func(buf []byte) []Request {
		rs := make([]Request, n)
		for i := range rs {
			rs[i] = fullReq(d, fl, buf[i*cb:(i+1)*cb], uint64(i))
		}
		return rs
	}
	if err := e.c.Write(ctx, reqs(want)); err != nil { // created resident
		t.Fatalf("write: %v", err)
	}
	rearm := func() {
		l.meets.Store(0)
		l.once = sync.Once{}
		l.met = make(chan struct{})
	}
	for _, name := range []string{"ServeResident", "Read"} {
		rearm()
		before := e.c.Stats()
		got := make([]byte, len(want))
		if name == "ServeResident" {
			served, err := e.c.ServeResident(ctx, false, reqs(got))
			if err != nil || served != n {
				t.Fatalf("%s: served %d of %d: %v", name, served, n, err)
			}
		} else if err := e.c.Read(ctx, reqs(got)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.meets.Load() == 0 {
			t.Fatalf("%s: the copies out of resident chunks never ran at once", name)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read other bytes than were written", name)
		}
		if s := e.c.Stats().Sub(before); s.Hits != n || s.Misses != 0 {
			t.Fatalf("%s: %d hits, %d misses, want %d hits", name, s.Hits, s.Misses, n)
		}
	}
	// One chunk: served alone (no meeting to wait for).
	rearm()
	l.want = 1
	got := make([]byte, cb)
	served, err := e.c.ServeResident(ctx, false, []Request{fullReq(d, fl, got, 3)})
	if err != nil || served != 1 || !bytes.Equal(got, want[3*cb:4*cb]) {
		t.Fatalf("one chunk: served %d: %v", served, err)
	}
}

// TestResidentParallelReadsRacingEviction: many goroutines read many
// resident chunks at once while others evict them (Invalidate) and read
// them back in: every read returns the model's bytes, whichever of its
// chunks were hits served on the workers, evicted between the look and
// the copy, or loaded again.
func TestResidentParallelReadsRacingEviction(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, Workers: 4})
	d, fl := e.dataset(1, -1, 16<<10)
	const n = 32
	cb := int(fl.chunkBytes())
	model := pattern(n*cb, 3)
	reqsOf := func(buf []byte, lo, hi int) []Request {
		rs := make([]Request, 0, hi-lo)
		for i := lo; i < hi; i++ {
			rs = append(rs, fullReq(d, fl, buf[(i-lo)*cb:(i-lo+1)*cb], uint64(i)))
		}
		return rs
	}
	must(t, e.c.Write(ctx, reqsOf(model, 0, n)))
	must(t, e.c.Flush(ctx))
	var wg, ev sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 60; k++ {
				lo := (g*7 + k*5) % (n / 2)
				hi := lo + n/2
				got := make([]byte, (hi-lo)*cb)
				if _, err := e.c.ServeResident(ctx, false, reqsOf(got, lo, hi)); err != nil {
					errs <- err
					return
				}
				// Whatever ServeResident served, Read serves the rest and
				// the whole buffer is the model's.
				if err := e.c.Read(ctx, reqsOf(got, lo, hi)); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, model[lo*cb:hi*cb]) {
					t.Errorf("reader %d: chunks %d..%d: wrong bytes", g, lo, hi)
					return
				}
			}
		}(g)
	}
	ev.Add(1)
	go func() {
		defer ev.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := d.Invalidate(ctx); err != nil {
				errs <- err
				return
			}
			if err := e.c.Read(ctx, reqsOf(make([]byte, n*cb), 0, n)); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	ev.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
