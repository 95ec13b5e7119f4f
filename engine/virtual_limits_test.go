package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/vfd"
)

// TestVirtualExtentOverflow: an extent beyond what a dataset can hold
// (an index past 2^63-1, more than 2^63-1 elements, or a sum or product
// that would wrap) is ErrInvalid at creation, leaving nothing, and at a
// later evaluation (sources appearing) an error that keeps the last
// extent; never a header that makes the file unreadable.
func TestVirtualExtentOverflow(t *testing.T) {
	ctx := context.Background()
	const big = uint64(1) << 62
	printf := func(start, stride, block uint64) VirtualSpec {
		return VirtualSpec{Type: Uint8, Shape: []uint64{0}, MaxShape: []uint64{Unlimited}, Mappings: []VirtualMapping{{
			Virtual: Hyperslab([]uint64{start}, []uint64{stride}, []uint64{Unlimited}, []uint64{block}),
			Dataset: "s%b", Source: Box([]uint64{0}, []uint64{block})}}}
	}
	src := DatasetSpec{Type: Uint8, Shape: []uint64{1}, Chunk: []uint64{1}}
	cases := []struct {
		what    string
		sources int
		spec    VirtualSpec
	}{
		{"stride 2^62 over 2 sources", 2, printf(big, big, 1)},
		{"3 blocks of 2^62", 3, printf(0, big, big)},
		{"4 blocks of 2^62 wrap", 4, printf(0, big, big)},
		{"2-D [2^40+1, 2^40]", 0, VirtualSpec{Type: Uint8, Shape: []uint64{0, 1 << 40}, MaxShape: []uint64{Unlimited, 1 << 40}, Mappings: []VirtualMapping{
			{Virtual: Box([]uint64{0, 0}, []uint64{1, 1 << 40}), File: "absent.scc", Dataset: "x", Source: Box([]uint64{0, 0}, []uint64{1, 1 << 40})},
			{Virtual: Box([]uint64{1 << 40, 0}, []uint64{1, 1 << 40}), File: "absent.scc", Dataset: "x", Source: Box([]uint64{0, 0}, []uint64{1, 1 << 40})},
		}}},
		{"one mapping of 2^80 elements", 0, VirtualSpec{Type: Uint8, Shape: []uint64{1 << 40, 1 << 40}, MaxShape: []uint64{Unlimited, 1 << 40}, Mappings: []VirtualMapping{
			{Virtual: Box([]uint64{0, 0}, []uint64{1 << 40, 1 << 40}), File: "absent.scc", Dataset: "x", Source: Box([]uint64{0, 0}, []uint64{1 << 40, 1 << 40})},
		}}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			drv := vfd.NewMem()
			f := tCreate(t, drv, nil)
			for k := range c.sources {
				_, err := f.CreateDataset(ctx, fmt.Sprintf("s%d", k), src)
				must(t, err)
			}
			if _, err := f.CreateVirtualDataset(ctx, "v", c.spec); !errors.Is(err, ErrInvalid) {
				t.Fatalf("create: %v, want ErrInvalid", err)
			}
			if _, err := f.OpenDataset(ctx, "v", nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a refused dataset is there: %v", err)
			}
			must(t, f.Flush(ctx))
			must(t, f.Close(ctx))
			f = tOpen(t, drv, nil) // writable; checked at cleanup
			must(t, f.Close(ctx))
		})
	}
	// Sources appearing later: the evaluation that would overflow fails,
	// the extent stays the last one that fits, and the file stays sound.
	t.Run("later", func(t *testing.T) {
		drv := vfd.NewMem()
		f := tCreate(t, drv, nil)
		_, err := f.CreateDataset(ctx, "s0", src)
		must(t, err)
		v, err := f.CreateVirtualDataset(ctx, "v", printf(big, big, 1))
		must(t, err)
		if sh := v.Shape(); sh[0] != big+1 {
			t.Fatalf("extent %v, want [2^62+1]", sh)
		}
		_, err = f.CreateDataset(ctx, "s1", src)
		must(t, err)
		// The refused evaluation fails that dataset's reads, not the
		// file's Refresh (the file's other datasets keep following).
		must(t, f.Refresh(ctx))
		if sh := v.Shape(); sh[0] != big+1 {
			t.Fatalf("extent after a refused evaluation %v", sh)
		}
		if err := v.Read(ctx, Box([]uint64{0}, []uint64{1}), make([]byte, 1)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "2^63-1") {
			t.Fatalf("read: %v, want ErrInvalid saying the limit", err)
		}
		must(t, f.Flush(ctx))
		must(t, f.Close(ctx))
		for _, ro := range []bool{false, true} {
			f = tOpen(t, drv, &Options{ReadOnly: ro})
			if _, err := f.OpenDataset(ctx, "v", nil); !errors.Is(err, ErrInvalid) {
				t.Fatalf("read-only %v: open: %v, want ErrInvalid", ro, err)
			}
			if _, err := f.OpenDataset(ctx, "s1", nil); err != nil {
				t.Fatal(err)
			}
			must(t, f.Close(ctx))
		}
	})
}

// TestVirtualPrintfFarRows: reading two rows of a printf virtual dataset
// 2^25 and 2^40 rows apart plans the two blocks that hold them, not every
// block between (the context is honoured too: a short deadline is met).
func TestVirtualPrintfFarRows(t *testing.T) {
	for _, gap := range []uint64{1 << 25, 1 << 40} {
		t.Run(fmt.Sprint(gap), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f := tCreate(t, vfd.NewMem(), nil)
			defer f.Close(ctx)
			one := DatasetSpec{Type: Uint8, Shape: []uint64{1}, Chunk: []uint64{1}}
			for name, val := range map[string]byte{"s0": 7, "t": 9} {
				d, err := f.CreateDataset(ctx, name, one)
				must(t, err)
				must(t, d.Write(ctx, All([]uint64{1}), []byte{val}))
			}
			// Column 0: one source per row (s<row>); column 1: row gap
			// from t, which sets the extent.
			v, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint8, Shape: []uint64{0, 2}, MaxShape: []uint64{Unlimited, 2}, Fill: []byte{1},
				Mappings: []VirtualMapping{
					{Virtual: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, nil), Dataset: "s%b", Source: Box([]uint64{0}, []uint64{1})},
					{Virtual: Box([]uint64{gap, 1}, []uint64{1, 1}), Dataset: "t", Source: Box([]uint64{0}, []uint64{1})},
				}})
			must(t, err)
			if sh := v.Shape(); sh[0] != gap+1 {
				t.Fatalf("extent %v", sh)
			}
			before := virtualPlanBlocks.Load()
			buf := make([]byte, 4)
			must(t, v.Read(ctx, Hyperslab([]uint64{0, 0}, []uint64{gap, 1}, []uint64{2, 2}, nil), buf))
			if got := virtualPlanBlocks.Load() - before; got > 2 {
				t.Fatalf("planned %d printf blocks for 2 rows", got)
			}
			if want := []byte{7, 1, 1, 9}; string(buf) != string(want) {
				t.Fatalf("read %v, want %v", buf, want)
			}
			// Every row of a run of 1000 from far away: 1000 blocks.
			before = virtualPlanBlocks.Load()
			must(t, v.Read(ctx, Box([]uint64{gap - 999, 0}, []uint64{1000, 2}), make([]byte, 2000)))
			if got := virtualPlanBlocks.Load() - before; got != 1000 {
				t.Fatalf("planned %d printf blocks for 1000 rows", got)
			}
			// A canceled context ends the read.
			cctx, ccancel := context.WithCancel(ctx)
			ccancel()
			if err := v.Read(cctx, Box([]uint64{0, 0}, []uint64{4096, 2}), make([]byte, 8192)); !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled read: %v", err)
			}
		})
	}
}

// TestVirtualBoxUnlimited: a Box with an Unlimited count, which the
// mapping documentation allows, maps every index from its start on, as
// the hyperslab of stride 1 does.
func TestVirtualBoxUnlimited(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	defer f.Close(ctx)
	src, err := f.CreateDataset(ctx, "src", DatasetSpec{Type: Uint8, Shape: []uint64{3, 2}, MaxShape: []uint64{Unlimited, 2}, Chunk: []uint64{2, 2}})
	must(t, err)
	must(t, src.Write(ctx, All([]uint64{3, 2}), []byte{1, 2, 3, 4, 5, 6}))
	v, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint8, Shape: []uint64{0, 2}, MaxShape: []uint64{Unlimited, 2}, Mappings: []VirtualMapping{{
		Virtual: Box([]uint64{1, 0}, []uint64{Unlimited, 2}), Dataset: "src", Source: Box([]uint64{0, 0}, []uint64{Unlimited, 2})}}})
	must(t, err)
	if sh := v.Shape(); sh[0] != 4 || sh[1] != 2 {
		t.Fatalf("extent %v, want [4 2]", sh)
	}
	buf := make([]byte, 8)
	must(t, v.Read(ctx, All(v.Shape()), buf))
	if want := []byte{0, 0, 1, 2, 3, 4, 5, 6}; string(buf) != string(want) {
		t.Fatalf("read %v, want %v", buf, want)
	}
	// A Box with an Unlimited count along a dimension that cannot grow
	// is refused as any unlimited mapping there is.
	_, err = f.CreateVirtualDataset(ctx, "w", VirtualSpec{Type: Uint8, Shape: []uint64{3, 2}, Mappings: []VirtualMapping{{
		Virtual: Box([]uint64{0, 0}, []uint64{Unlimited, 2}), Dataset: "src", Source: Box([]uint64{0, 0}, []uint64{Unlimited, 2})}}})
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "stride") {
		t.Fatalf("unlimited along a fixed dimension: %v, want ErrInvalid not speaking of a stride", err)
	}
}
