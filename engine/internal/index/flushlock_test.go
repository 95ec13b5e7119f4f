package index

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// blockingStore holds every WriteAt while a gate is set, after announcing
// it on entered.
type blockingStore struct {
	*memStore
	gate    atomic.Pointer[chan struct{}]
	entered chan struct{}
}

func (s *blockingStore) WriteAt(ctx context.Context, p []byte, off int64) error {
	if g := s.gate.Load(); g != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-*g
	}
	return s.memStore.WriteAt(ctx, p, off)
}

// within waits for done; the bound only turns a deadlock into a failure.
func within(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked behind a Flush's block write", what)
	}
}

// TestLookupDuringFlushWrite: every kind's Flush used to hold the index
// lock while writing its blocks, so a lookup of the dataset waited for the
// commit's I/O. Here a Flush is held inside a block write while lookups of
// loaded and of not yet loaded blocks complete; a Put issued meanwhile
// waits for the Flush, lands after it, and the next Flush stores it.
func TestLookupDuringFlushWrite(t *testing.T) {
	ctx := context.Background()
	for _, mc := range modelCases {
		t.Run(mc.name, func(t *testing.T) {
			s := &blockingStore{memStore: newMemStore(t), entered: make(chan struct{}, 1)}
			g := Geometry{Grid: mc.bound, MaxGrid: mc.max}
			x, err := NewConfig(mc.kind, g, s, mc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ref := refModel{}
			r := rand.New(rand.NewPCG(5, 5))
			put := func(x Index) []uint64 {
				c := randCoord(r, mc.bound)
				e := randEntry(r)
				if !e.Exists() {
					e = Entry{Addr: 1, Size: 1}
				}
				if _, err := x.Put(ctx, c, e); err != nil {
					t.Fatal(err)
				}
				ref[key(c)] = refItem{c, e}
				return c
			}
			for k := 0; k < 200; k++ {
				put(x)
			}
			root, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			// A reopened index has nothing loaded: its lookups must read.
			x, err = Open(ctx, mc.kind, g, root, s)
			if err != nil {
				t.Fatal(err)
			}
			dirty := put(x)
			gate := make(chan struct{})
			s.gate.Store(&gate)
			flushed := make(chan error, 1)
			go func() {
				_, err := x.Flush(ctx)
				flushed <- err
			}()
			within(t, "the Flush", s.entered)
			looked := make(chan struct{})
			go func() {
				defer close(looked)
				for _, it := range ref {
					if e, err := x.Get(ctx, it.c); err != nil || e != it.e {
						t.Errorf("Get(%v) during Flush = %+v, %v; want %+v", it.c, e, err, it.e)
						return
					}
				}
				if n := x.Len(); n != len(ref) {
					t.Errorf("Len during Flush = %d, want %d", n, len(ref))
				}
			}()
			within(t, "lookups", looked)
			late := Entry{Addr: 99, Size: 7}
			putDone := make(chan struct{})
			go func() {
				defer close(putDone)
				if _, err := x.Put(ctx, dirty, late); err != nil {
					t.Error(err)
				}
			}()
			s.gate.Store(nil)
			close(gate)
			if err := <-flushed; err != nil {
				t.Fatal(err)
			}
			s.commit()
			within(t, "the Put", putDone)
			ref[key(dirty)] = refItem{dirty, late}
			root, err = x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			checkExtents(t, ctx, x, s.memStore)
			y, err := Open(ctx, mc.kind, g, root, s)
			if err != nil {
				t.Fatal(err)
			}
			checkAll(t, ctx, y, ref)
		})
	}
}
