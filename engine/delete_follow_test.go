package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

var followSpec = DatasetSpec{Type: Uint8, Shape: []uint64{4096}, Chunk: []uint64{1024}}

// TestDeleteMoveFollower: a read-only File following the writer sees a
// deleted name go (its handle answers ErrDeleted) and a moved dataset's
// handle follow it, and before it refreshes it reads the deleted
// dataset's old bytes or fails with ErrStale, never the bytes the writer
// stored in the freed space since.
func TestDeleteMoveFollower(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	w := tCreate(t, drv, nil)
	for i, n := range []string{"g/a", "g/b"} {
		d, err := w.CreateDataset(ctx, n, followSpec)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, d, bytes.Repeat([]byte{byte(i + 1)}, 4096))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := tOpen(t, drv, &Options{ReadOnly: true})
	defer r.Close(ctx)
	ha, err := r.OpenDataset(ctx, "g/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := r.OpenDataset(ctx, "g/b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, "g/a", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Move(ctx, "g/b", "h"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // reuse the freed space
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := w.CreateDataset(ctx, fmt.Sprintf("c%d", i), followSpec)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, d, bytes.Repeat([]byte{9}, 4096))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	err = ha.Read(ctx, All(followSpec.Shape), buf)
	switch {
	case err == nil:
		if !bytes.Equal(buf, bytes.Repeat([]byte{1}, 4096)) {
			t.Fatalf("the stale handle read foreign bytes %v...", buf[:8])
		}
	case errors.Is(err, ErrStale), errors.Is(err, ErrDeleted):
	default:
		t.Fatalf("stale read: %v", err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.Read(ctx, All(followSpec.Shape), buf); !errors.Is(err, ErrDeleted) {
		t.Fatalf("read of a deleted dataset after refresh: %v, want ErrDeleted", err)
	}
	if _, err := r.OpenDataset(ctx, "g/a", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of a deleted name: %v", err)
	}
	if got, want := r.datasetNames(), []string{"c0", "c1", "c2", "h"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("datasets %v, want %v", got, want)
	}
	g, err := r.OpenGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if ms := members(t, g); len(ms) != 0 {
		t.Fatalf("members of g %v", ms)
	}
	if hb.Path() != "/h" || hb.Name() != "h" {
		t.Fatalf("moved handle names %q", hb.Path())
	}
	if got := mustRead(t, hb); !bytes.Equal(got, bytes.Repeat([]byte{2}, 4096)) {
		t.Fatalf("moved handle reads %v...", got[:8])
	}
}

// TestDeleteFollowerConcurrent: the writer keeps creating, filling,
// deleting and moving datasets, each holding one value everywhere, while
// a follower refreshes and reads whatever it finds: a read returns that
// dataset's value or fails with ErrNotFound, ErrDeleted or ErrStale,
// never the bytes of another dataset that reused its space.
func TestDeleteFollowerConcurrent(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	w := tCreate(t, drv, nil)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := tOpen(t, drv, &Options{ReadOnly: true})
	defer r.Close(ctx)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Pointer[error]
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for !stop.Load() {
				if err := r.Refresh(ctx); err != nil && !errors.Is(err, ErrStale) {
					bad.CompareAndSwap(nil, &err)
					return
				}
				for _, n := range r.datasetNames() {
					// Every name ends in the value its dataset holds.
					v, _ := strconv.Atoi(n[strings.LastIndexByte(n, 'v')+1:])
					d, err := r.OpenDataset(ctx, n, nil)
					if err != nil {
						if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrStale) {
							bad.CompareAndSwap(nil, &err)
							return
						}
						continue
					}
					err = d.Read(ctx, All(followSpec.Shape), buf)
					d.Close(ctx)
					switch {
					case err == nil:
						if !bytes.Equal(buf, bytes.Repeat([]byte{byte(v)}, 4096)) {
							e := fmt.Errorf("%s reads %v..., want %d", n, buf[:8], v)
							bad.CompareAndSwap(nil, &e)
							return
						}
					case errors.Is(err, ErrStale), errors.Is(err, ErrDeleted), errors.Is(err, ErrNotFound):
					default:
						bad.CompareAndSwap(nil, &err)
						return
					}
				}
			}
		}()
	}
	for i := 1; i <= 60 && bad.Load() == nil; i++ {
		n := fmt.Sprintf("g%d/v%d", i%3, i)
		d, err := w.CreateDataset(ctx, n, followSpec)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, d, bytes.Repeat([]byte{byte(i)}, 4096))
		d.Close(ctx)
		if i%4 == 0 {
			if _, err := w.CreateGroup(ctx, fmt.Sprintf("m%d", i)); err != nil {
				t.Fatal(err)
			}
			if err := w.Move(ctx, n, fmt.Sprintf("m%d/v%d", i, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := w.Delete(ctx, fmt.Sprintf("g%d", (i/3)%3), &DeleteOptions{Recursive: true}); err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if p := bad.Load(); p != nil {
		t.Fatalf("follower: %v", *p)
	}
}
