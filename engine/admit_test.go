package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestFilesShareTheCachesAdmitter: admission belongs to the cache. Two
// files on one cache get the same Admitter, its capacity is the cache's
// active limit, and a file on another cache gets another one.
func TestFilesShareTheCachesAdmitter(t *testing.T) {
	c, err := cache.New(cache.Config{QuiescentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f1 := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	f2 := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	f3 := tCreate(t, vfd.NewMem(), nil) // its own cache
	if f1.admit == nil || f1.admit != f2.admit {
		t.Fatalf("files on one cache have admitters %p and %p", f1.admit, f2.admit)
	}
	if f3.admit == f1.admit {
		t.Fatal("a file on another cache shares the admitter")
	}
	if got, want := f1.admit.Capacity(), c.Stats().ActiveLimit; got != want {
		t.Fatalf("admitter capacity %d, cache active limit %d", got, want)
	}
	for _, f := range []*File{f1, f2, f3} {
		if err := f.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLargeRequestInAdmittedBatches: a request of many times the batch
// budget goes through in batches and leaves nothing admitted.
func TestLargeRequestInAdmittedBatches(t *testing.T) {
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10}})
	defer f.Close(context.Background())
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{64, 1024}, Chunk: []uint64{4, 1024}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	buf := make([]byte, 64*1024)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{64, 1024}), buf); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(buf))
	if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{64, 1024}), got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != buf[i] {
			t.Fatalf("byte %d: %d, want %d", i, got[i], buf[i])
		}
	}
	if in, w := f.admit.InUse(), f.admit.Waiting(); in != 0 || w != 0 {
		t.Fatalf("after the requests: %d bytes admitted, %d waiting", in, w)
	}
}

type foreignAdmission struct{}

func (foreignAdmission) SetCapacity(int64) {}

// TestForeignAdmissionRefused: a cache whose admission control someone
// else installed is refused with ErrInvalid instead of panicking.
func TestForeignAdmissionRefused(t *testing.T) {
	c, err := cache.New(cache.Config{QuiescentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Admission(func(int64) cache.Admission { return foreignAdmission{} })
	if _, err := Create(context.Background(), "", &Options{Driver: vfd.NewMem(), Cache: c}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CreateWith on a cache with a foreign admission: %v, want ErrInvalid", err)
	}
}
