package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wantErr fails t unless err matches sentinel and its text holds every
// part.
func wantErr(t *testing.T, what string, err, sentinel error, parts ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v, want %v", what, err, sentinel)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %q does not say %q", what, err, p)
		}
	}
}

// TestOpenSaysWhatTheFileIs: an open of something that is not an scc
// file names the file and says what it is and what to do; a cut scc file
// says how many bytes it has and how many it needs; a second writer is
// told to open read-only.
func TestOpenSaysWhatTheFileIs(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h5 := append([]byte("\x89HDF\r\n\x1a\n"), make([]byte, 4000)...)
	userBlock := append(make([]byte, 1024), h5...)
	cases := []struct {
		name  string
		bytes []byte
		parts []string
	}{
		{"empty.scc", nil, []string{"empty file"}},
		{"a.h5", h5, []string{"not an scc file", "looks like HDF5", "scctl import"}},
		{"ub.h5", userBlock, []string{"not an scc file", "looks like HDF5"}},
		{"a.zip", append([]byte("PK\x03\x04"), make([]byte, 100)...), []string{"not an scc file", "zip"}},
		{"text.txt", []byte("hello, world\n"), []string{"not an scc file"}},
	}
	for _, c := range cases {
		p := write(c.name, c.bytes)
		for _, ro := range []bool{false, true} {
			_, err := Open(ctx, p, &Options{ReadOnly: ro})
			wantErr(t, c.name, err, ErrCorrupt, append([]string{p}, c.parts...)...)
			if strings.Contains(err.Error(), "checksum") {
				t.Fatalf("%s: %q speaks of checksums of a file that is not scc's", c.name, err)
			}
		}
	}

	// A real file, cut.
	good := filepath.Join(dir, "good.scc")
	f := tCreatePath(t, good, nil)
	d, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{1 << 16}, Chunk: []uint64{1 << 12}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, All([]uint64{1 << 16}), fillBytes(1<<16, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{5000, len(full) / 2} {
		p := write("cut.scc", full[:n])
		_, err := Open(ctx, p, &Options{ReadOnly: true})
		wantErr(t, "cut file", err, ErrCorrupt, p, "truncated: ", " bytes, at least ", " expected")
		if !strings.Contains(err.Error(), "truncated: "+itoa(n)+" bytes") {
			t.Fatalf("cut file: %q does not give its size %d", err, n)
		}
	}

	// A Zarr store's directory.
	store := filepath.Join(dir, "store.zarr")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	write("store.zarr/.zgroup", []byte(`{"zarr_format": 2}`))
	_, err = Open(ctx, store, nil)
	wantErr(t, "zarr store", err, ErrInvalid, store, "Zarr", "scctl import")

	// A second writer.
	w := tCreatePath(t, filepath.Join(dir, "w.scc"), nil)
	_, err = Open(ctx, filepath.Join(dir, "w.scc"), nil)
	wantErr(t, "second writer", err, ErrLocked, "w.scc", "open for writing elsewhere", "read-only")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

// TestRequestErrorsSayItOnce: out-of-range and type errors name the
// dataset and the coordinate against the extent, and say their class once.
func TestRequestErrorsSayItOnce(t *testing.T) {
	ctx := t.Context()
	f := tCreatePath(t, filepath.Join(t.TempDir(), "r.scc"), nil)
	d, err := f.CreateDataset(ctx, "g/d", DatasetSpec{Type: Uint16, Shape: []uint64{10, 10}, Chunk: []uint64{5, 5}})
	if err != nil {
		t.Fatal(err)
	}
	once := func(what string, err error, class error, parts ...string) {
		t.Helper()
		wantErr(t, what, err, class, parts...)
		for _, rep := range []string{"out of range", "invalid"} {
			if strings.Count(err.Error(), rep) > 1 {
				t.Fatalf("%s: %q says %q more than once", what, err, rep)
			}
		}
	}
	once("read past the extent", d.Read(ctx, Box([]uint64{8, 0}, []uint64{5, 5}), make([]byte, 50)), ErrOutOfRange,
		`dataset "g/d"`, "dimension 0", "index 12", "extent is 10")
	once("write past the extent", d.Write(ctx, Box([]uint64{0, 0}, []uint64{5, 11}), make([]byte, 110)), ErrOutOfRange,
		`dataset "g/d"`, "dimension 1")
	once("rank", d.Read(ctx, Box([]uint64{0}, []uint64{5}), make([]byte, 10)), ErrInvalid, `dataset "g/d"`, "rank")
	once("buffer", d.Read(ctx, Box([]uint64{0, 0}, []uint64{5, 5}), make([]byte, 49)), ErrInvalid, `dataset "g/d"`, "49 bytes")
	once("extent", d.SetExtent(ctx, []uint64{20, 10}), ErrOutOfRange, `dataset "g/d"`, "max shape")
	once("type", WriteSlice(ctx, d, All([]uint64{10, 10}), make([]float32, 100)), ErrInvalid, `dataset "g/d"`, "float32")
	vals := make([]uint16, 100)
	vals[7] = 300
	if err := WriteSlice(ctx, d, All([]uint64{10, 10}), vals); err != nil {
		t.Fatal(err)
	}
	once("strict conversion", ReadAs(ctx, d, All([]uint64{10, 10}), make([]uint8, 100), ConvertOptions{Strict: true}), ErrOutOfRange,
		`dataset "g/d"`, "element 7", "300")
	_, _, err = d.ReadChunkRaw(ctx, []uint64{2, 0})
	once("raw chunk", err, ErrOutOfRange, `dataset "g/d"`, "chunk [2 0]")
	sp, err := f.CreateDataset(ctx, "sp", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: Sparse})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sp.DefinedElements(ctx, Box([]uint64{3}, []uint64{2}))
	once("sparse", err, ErrOutOfRange, `dataset "sp"`, "extent is 4")
	// Lower layers' errors, classified, keep both sentinels in the chain.
	c := classify(errors.New("x"))
	if !errors.Is(c, ErrIO) {
		t.Fatalf("classify: %v", c)
	}
}
