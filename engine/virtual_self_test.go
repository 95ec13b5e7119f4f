package engine

import (
	"context"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestVirtualOwnSourceCreatedLater: a virtual dataset mapping a dataset of
// its own file that does not exist yet reads fill, and reads the dataset
// once it is created and written, without a Refresh: the file's own
// catalog is not another file's state seen at some moment.
func TestVirtualOwnSourceCreatedLater(t *testing.T) {
	ctx := context.Background()
	f, err := CreateWith(vfd.NewMem(), &Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint16, Shape: []uint64{2, 4}, Fill: []byte{5, 5}, Mappings: []VirtualMapping{
		{Virtual: Box([]uint64{0, 0}, []uint64{2, 4}), Dataset: "late", Source: Box([]uint64{0, 0}, []uint64{2, 4})},
	}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() []byte {
		t.Helper()
		buf := make([]byte, 16)
		if err := v.Read(ctx, All([]uint64{2, 4}), buf); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	ref := newRef([]uint64{2, 4}, 2, []byte{5, 5})
	if d := firstDiff(read(), ref.data, 2); d >= 0 {
		t.Fatalf("before the source exists: element %d is not fill", d)
	}
	late, err := f.CreateDataset("late", DatasetSpec{Type: Uint16, Shape: []uint64{2, 4}, Chunk: []uint64{1, 4}})
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if err := late.Write(ctx, All([]uint64{2, 4}), buf); err != nil {
		t.Fatal(err)
	}
	ref.write(All([]uint64{2, 4}), buf)
	if d := firstDiff(read(), ref.data, 2); d >= 0 {
		t.Fatalf("after the source was created and written: element %d reads %x, model %x", d, read()[2*d:2*d+2], ref.data[2*d:2*d+2])
	}
}
