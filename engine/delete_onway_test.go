package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// A request that passed its checks before File.Delete but reaches the
// serializer after it (queued behind the delete's exclusive hold) must not
// work on the deleted dataset's freed state: it returns ErrDeleted and
// writes nothing, on every call that takes the serializer.
func TestDeleteRequestsOnTheirWay(t *testing.T) {
	ctx := context.Background()
	calls := []struct {
		name string
		spec DatasetSpec
		call func(ds *Dataset) error
	}{
		{"WriteChunkRaw", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}}, func(ds *Dataset) error {
			return ds.WriteChunkRaw(ctx, []uint64{1}, []byte{1, 2, 3, 4}, 0)
		}},
		{"ReadChunkRaw", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}}, func(ds *Dataset) error {
			_, _, err := ds.ReadChunkRaw(ctx, []uint64{0})
			return err
		}},
		{"Write", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}}, func(ds *Dataset) error {
			return ds.Write(ctx, Box([]uint64{0}, []uint64{8}), make([]byte, 8))
		}},
		{"WriteStrings", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: Vlen}, func(ds *Dataset) error {
			return ds.WriteStrings(ctx, Box([]uint64{0}, []uint64{2}), []string{"a", "b"})
		}},
		{"Erase", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: Sparse}, func(ds *Dataset) error {
			return ds.Erase(ctx, Box([]uint64{0}, []uint64{2}))
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			f := tCreate(t, vfd.NewMem(), nil)
			ds, err := f.CreateDataset(ctx, "d", c.spec)
			if err != nil {
				t.Fatal(err)
			}
			if c.spec.Layout != Vlen {
				if err := ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{9, 9, 9, 9}); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			release, err := f.ser.AcquireExclusive(ctx, ds.s.id)
			if err != nil {
				t.Fatal(err)
			}
			waitQueued := func(n int) {
				for f.ser.Waiting() < n {
					runtime.Gosched()
				}
			}
			deleted := make(chan error, 1)
			go func() { deleted <- f.Delete(ctx, "d", nil) }()
			waitQueued(1)
			done := make(chan error, 1)
			go func() { done <- c.call(ds) }()
			waitQueued(2)
			release()
			if err := <-deleted; err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, ErrDeleted) {
				t.Fatalf("%s queued behind the delete: %v, want ErrDeleted", c.name, err)
			}
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if st := f.Cache().Stats(); st.DirtyBytes != 0 {
				t.Fatalf("%d dirty bytes after the delete's commit", st.DirtyBytes)
			}
		})
	}
}
