package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestVirtualURLSource: a source named by a URL this File has no way to
// open is an ErrIO naming it, for the extent and for reads, never a
// missing source read as fill; with VirtualOptions.OpenURL the URL is
// opened through it. Before, the URL was taken for a local path, found
// missing, and read as fill.
func TestVirtualURLSource(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, vp := filepath.Join(dir, "a.scc"), filepath.Join(dir, "v.scc")
	lcCreate(t, a, 3, 100)
	const url = "s3://bucket/a.scc?endpoint=http://127.0.0.1:1"
	opened := 0
	openURL := func(ctx context.Context, u string, opts *Options) (*File, error) {
		if u != url {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, u)
		}
		opened++
		return Open(ctx, a, opts)
	}
	// Without OpenURL the creation itself cannot look at the source.
	w, err := Create(ctx, vp, &Options{NoSync: true})
	must(t, err)
	if _, err := w.CreateVirtualDataset(ctx, "x", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Mappings: lcColumns(url)}); !errors.Is(err, ErrIO) || !strings.Contains(err.Error(), "s3://bucket/a.scc") {
		t.Fatalf("create over a URL this File cannot open: %v, want ErrIO naming it", err)
	}
	must(t, w.Close(ctx))
	w, err = Create(ctx, vp, &Options{NoSync: true, Virtual: VirtualOptions{OpenURL: openURL}})
	must(t, err)
	for _, tc := range []struct {
		name  string
		shape []uint64
		ms    []VirtualMapping
	}{
		{"unlimited", []uint64{0, lcW}, lcColumns(url)},
		{"bounded", []uint64{3, lcW}, []VirtualMapping{{Virtual: Box([]uint64{0, 0}, []uint64{3, lcW}), File: url, Dataset: "frames", Source: Box([]uint64{0, 0}, []uint64{3, lcW})}}},
	} {
		maxShape := slices.Clone(tc.shape)
		if tc.shape[0] == 0 {
			maxShape[0] = Unlimited
		}
		_, err := w.CreateVirtualDataset(ctx, tc.name, VirtualSpec{Type: Uint32, Shape: tc.shape, MaxShape: maxShape, Mappings: tc.ms})
		must(t, err)
	}
	must(t, w.Close(ctx))
	for _, name := range []string{"unlimited", "bounded"} {
		v := lcFresh(vp, name)
		if !errors.Is(v.err, ErrIO) || !strings.Contains(v.err.Error(), "s3://bucket/a.scc") {
			t.Fatalf("%s over a URL this File cannot open: %v (shape %v), want ErrIO naming it", name, v.err, v.shape)
		}
	}
	// Opened through OpenURL (here: the local file behind it).
	opened = 0
	f := tOpenPath(t, vp, &Options{ReadOnly: true, Virtual: VirtualOptions{OpenURL: openURL}})
	for _, name := range []string{"unlimited", "bounded"} {
		ds, err := f.OpenDataset(ctx, name, nil)
		must(t, err)
		got := lcRead(ds)
		must(t, got.err)
		if got.shape[0] != 3 || got.vals[0] != lcVal(100, 0, 0) {
			t.Fatalf("%s through OpenURL: %v %v", name, got.shape, got.vals[:4])
		}
	}
	if opened != 1 {
		t.Fatalf("OpenURL ran %d times, want once", opened)
	}
}
