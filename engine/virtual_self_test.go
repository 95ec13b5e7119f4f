package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestVirtualOwnSourceCreatedLater: a virtual dataset mapping a dataset of
// its own file that does not exist yet reads fill, and reads the dataset
// once it is created and written, without a Refresh: the file's own
// catalog is not another file's state seen at some moment.
func TestVirtualOwnSourceCreatedLater(t *testing.T) {
	ctx := context.Background()
	f, err := Create(ctx, "", &Options{Driver: vfd.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
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
	late, err := f.CreateDataset(ctx, "late", DatasetSpec{Type: Uint16, Shape: []uint64{2, 4}, Chunk: []uint64{1, 4}})
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

// TestVirtualSourceCycle: a virtual dataset that names itself through its
// file's path (not "."), or through a link to it, is refused with
// ErrInvalid naming the reference: at creation when it can tell (the path
// is its own file's, which reads as "."), else when it is opened
// (unlimited mappings: the extent) or read (bounded ones). Before, the
// open evaluated the source's extent, which opened the file again, and so
// on until the process ran out of files.
func TestVirtualSourceCycle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		virt, src Selection
		dset      string
	}{
		{"unlimited", Hyperslab([]uint64{0}, []uint64{4}, []uint64{Unlimited}, []uint64{4}), Hyperslab([]uint64{0}, []uint64{4}, []uint64{Unlimited}, []uint64{4}), "v"},
		{"printf", Hyperslab([]uint64{0}, []uint64{4}, []uint64{Unlimited}, []uint64{4}), Box([]uint64{0}, []uint64{4}), "v%b"},
		{"bounded", Box([]uint64{0}, []uint64{4}), Box([]uint64{0}, []uint64{4}), "v"},
	} {
		for _, via := range []string{"path", "link"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				dir := t.TempDir()
				p := filepath.Join(dir, "v.scc")
				f := tCreatePath(t, p, nil)
				file := "v.scc"
				if via == "link" {
					must(t, os.Link(p, filepath.Join(dir, "link.scc")))
					file = "link.scc"
				}
				name := strings.ReplaceAll(tc.dset, "%b", "0")
				_, err := f.CreateVirtualDataset(ctx, name, VirtualSpec{Type: Uint8, Shape: []uint64{4}, MaxShape: []uint64{Unlimited},
					Mappings: []VirtualMapping{{Virtual: tc.virt, File: file, Dataset: tc.dset, Source: tc.src}}})
				if err == nil {
					must(t, f.Close(ctx))
					g := tOpenPath(t, p, &Options{ReadOnly: true})
					defer g.Close(ctx)
					var d *Dataset
					d, err = g.OpenDataset(ctx, name, nil)
					if err == nil {
						defer d.Close(ctx)
						err = d.Read(ctx, Box([]uint64{0}, []uint64{4}), make([]byte, 4))
					}
				}
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "itself") {
					t.Fatalf("a virtual dataset that is its own source: %v, want ErrInvalid naming it", err)
				}
			})
		}
	}
}
