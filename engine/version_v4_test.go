package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/internal/format"
)

// v4Data is the generator's contents (testdata/v4.scc.go.txt).
func v4Data(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i/251)
	}
	return b
}

// oldVersionFixture copies testdata/v<version>.scc, a file an earlier
// scc wrote at that format version, into a temporary directory, checks its
// superblock's version and that Check passes, and returns the copy's path.
func oldVersionFixture(t *testing.T, version byte) string {
	t.Helper()
	name := fmt.Sprintf("v%d.scc", version)
	src, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	require.Equal(t, version, src[4], "fixture superblock version")
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, src, 0o644))
	_, err = Check(t.Context(), path, nil)
	require.NoError(t, err, "check of the v%d file", version)
	return path
}

// TestReadsVersion4File: testdata/v4.scc was written by scc at format
// version 4 (the program in testdata/v4.scc.go.txt), before chunk keys:
// its chunk frames carry the unkeyed CRC32C trailer. It reads and checks
// as it did; written to, its datasets keep their rule (no key appears in
// their headers) while a dataset created in it is keyed, and everything
// reads back and checks after reopening.
func TestReadsVersion4File(t *testing.T) {
	ctx := t.Context()
	path := oldVersionFixture(t, 4)
	want := map[string][]byte{
		"dense": v4Data(64*64, 0),
		"zstd":  v4Data(64*32*2, 1),
		"crc":   v4Data(64*64, 2),
		"big":   v4Data(2*65536, 3),
	}
	contig := v4Data(64*64, 5)
	want["contig"] = contig
	verify := func(f *File) {
		t.Helper()
		for name, w := range want {
			d, err := f.OpenDataset(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(w))
			if err := d.Read(ctx, All(d.Shape()), got); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !bytes.Equal(got, w) {
				t.Fatalf("%s: contents differ", name)
			}
			d.Close(ctx)
		}
		sp, err := f.OpenDataset(ctx, "sparse", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 600)
		if err := sp.Read(ctx, Box([]uint64{3, 5}, []uint64{20, 30}), got); err != nil || !bytes.Equal(got, v4Data(600, 4)) {
			t.Fatalf("sparse: %v", err)
		}
		sp.Close(ctx)
		vl, err := f.OpenDataset(ctx, "vlen", nil)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := vl.ReadVlen(ctx, All([]uint64{8, 8}))
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if !bytes.Equal(v, v4Data(i%9, byte(i))) {
				t.Fatalf("vlen element %d differs", i)
			}
		}
		vl.Close(ctx)
	}
	ro := tOpenPath(t, path, &Options{ReadOnly: true})
	verify(ro)
	if err := ro.Close(ctx); err != nil {
		t.Fatal(err)
	}

	f := tOpenPath(t, path, nil)
	for _, name := range []string{"dense", "crc", "big"} {
		d, err := f.OpenDataset(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := v4Data(len(want[name]), 9)
		if err := d.Write(ctx, All(d.Shape()), w); err != nil {
			t.Fatal(err)
		}
		want[name] = w
		if d.s.csum.Key() != 0 {
			t.Fatalf("%s: a dataset of the v4 file got a chunk key", name)
		}
		d.Close(ctx)
	}
	nd, err := f.CreateDataset(ctx, "new", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}, Filters: []Filter{CRC32C()}})
	if err != nil {
		t.Fatal(err)
	}
	if nd.s.csum.Key() == 0 {
		t.Fatal("a dataset created now has no chunk key")
	}
	want["new"] = v4Data(64, 11)
	if err := nd.Write(ctx, All([]uint64{64}), want["new"]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(ctx, path, nil); err != nil {
		t.Fatalf("check after writing: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := max(b[format.SlotA+4], b[format.SlotB+4]); v != format.Version {
		t.Fatalf("superblock version %d after a commit, want %d", v, format.Version)
	}
	ro = tOpenPath(t, path, &Options{ReadOnly: true})
	verify(ro)
}
