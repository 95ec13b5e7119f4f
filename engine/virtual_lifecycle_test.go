package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
)

// The virtual-dataset lifecycle: sources created, cut short while being
// created, deleted, moved, replaced, recreated, truncated, made a symlink
// loop or a FIFO, while a writer writes and a follower refreshes. In every
// state the follower, after its Refresh, reads what a fresh open of the
// virtual file reads.

const lcW = 4 // elements per source row

// lcVal is element e of row i of a source whose values start at base.
func lcVal(base uint32, i, e uint64) uint32 { return base + uint32(i*lcW+e) }

// lcRows writes rows [from, to) of the source dataset ds with base's
// values, growing it.
func lcRows(t *testing.T, ds *Dataset, from, to uint64, base uint32) {
	t.Helper()
	ctx := context.Background()
	must(t, ds.SetExtent(ctx, []uint64{to, lcW}))
	if to == from {
		return
	}
	vals := make([]uint32, 0, (to-from)*lcW)
	for i := from; i < to; i++ {
		for e := uint64(0); e < lcW; e++ {
			vals = append(vals, lcVal(base, i, e))
		}
	}
	must(t, WriteSlice(ctx, ds, Box([]uint64{from, 0}, []uint64{to - from, lcW}), vals))
}

var lcSpec = DatasetSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW}, Chunk: []uint64{1, lcW}}

// lcCreate creates (or replaces, through Create) the source file at path
// holding "frames" of rows rows.
func lcCreate(t *testing.T, path string, rows uint64, base uint32) {
	t.Helper()
	f, err := Create(context.Background(), path, &Options{NoSync: true})
	must(t, err)
	ds, err := f.CreateDataset(context.Background(), "frames", lcSpec)
	must(t, err)
	lcRows(t, ds, 0, rows, base)
	must(t, f.Close(context.Background()))
}

// lcAppend appends rows to the source at path.
func lcAppend(t *testing.T, path string, rows uint64, base uint32) {
	t.Helper()
	f, err := Open(context.Background(), path, &Options{NoSync: true})
	must(t, err)
	ds, err := f.OpenDataset(context.Background(), "frames", nil)
	must(t, err)
	n := ds.Shape()[0]
	lcRows(t, ds, n, n+rows, base)
	must(t, f.Close(context.Background()))
}

// lcColumns maps source file i's "frames" to columns [4i, 4i+4) of an
// unlimited virtual dataset.
func lcColumns(files ...string) []VirtualMapping {
	var ms []VirtualMapping
	for i, file := range files {
		ms = append(ms, VirtualMapping{
			Virtual: Hyperslab([]uint64{0, uint64(i * lcW)}, nil, []uint64{Unlimited, 1}, []uint64{1, lcW}),
			File:    file, Dataset: "frames",
			Source: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, lcW}),
		})
	}
	return ms
}

// lcVirtual creates the virtual file at path with dataset "v" over ms.
func lcVirtual(t *testing.T, path string, cols int, ms []VirtualMapping) {
	t.Helper()
	f, err := Create(context.Background(), path, &Options{NoSync: true})
	must(t, err)
	_, err = f.CreateVirtualDataset(context.Background(), "v", VirtualSpec{Type: Uint32,
		Shape: []uint64{0, uint64(cols * lcW)}, MaxShape: []uint64{Unlimited, uint64(cols * lcW)}, Fill: []byte{7, 0, 0, 0}, Mappings: ms})
	must(t, err)
	must(t, f.Close(context.Background()))
}

// lcView is what one reader read of a virtual dataset.
type lcView struct {
	shape []uint64
	vals  []uint32
	err   error
}

func lcRead(ds *Dataset) lcView {
	sh := ds.Shape()
	vals := make([]uint32, sh[0]*sh[1])
	err := ReadSlice(context.Background(), ds, All(sh), vals)
	if err != nil {
		vals = nil
	}
	return lcView{shape: sh, vals: vals, err: err}
}

// lcFresh reads dataset name of the file at path as a fresh open does.
func lcFresh(path, name string) lcView {
	f, err := Open(context.Background(), path, &Options{ReadOnly: true})
	if err != nil {
		return lcView{err: err}
	}
	defer f.Close(context.Background())
	ds, err := f.OpenDataset(context.Background(), name, nil)
	if err != nil {
		return lcView{err: err}
	}
	defer ds.Close(context.Background())
	return lcRead(ds)
}

// lcKind is the sentinel an error matches, for comparing two readers'
// failures.
func lcKind(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// lcSame fails the test unless the follower read what the fresh open did.
func lcSame(t *testing.T, state string, got, want lcView) {
	t.Helper()
	switch {
	case (got.err == nil) != (want.err == nil) || lcKind(got.err) != lcKind(want.err):
		t.Fatalf("%s: follower: %v; a fresh open: %v", state, got.err, want.err)
	case got.err != nil:
		return
	case !slices.Equal(got.shape, want.shape):
		t.Fatalf("%s: follower sees extent %v, a fresh open %v", state, got.shape, want.shape)
	case !slices.Equal(got.vals, want.vals):
		i := 0
		for i < len(got.vals) && got.vals[i] == want.vals[i] {
			i++
		}
		t.Fatalf("%s: follower reads %d at element %d, a fresh open %d", state, got.vals[i], i, want.vals[i])
	}
}

// lcFollow refreshes the follower r (Refresh must not fail: a source's
// trouble is its readers') and compares its read of ds with a fresh open.
func lcFollow(t *testing.T, state string, r *File, ds *Dataset, path string) lcView {
	t.Helper()
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatalf("%s: Refresh: %v", state, err)
	}
	got := lcRead(ds)
	lcSame(t, state, got, lcFresh(path, ds.Path()))
	return got
}

// lcOpenFollower opens the follower of the virtual file at path.
func lcOpenFollower(t *testing.T, path, name string) (*File, *Dataset) {
	t.Helper()
	r, err := Open(context.Background(), path, &Options{ReadOnly: true})
	must(t, err)
	t.Cleanup(func() { r.Close(context.Background()) })
	ds, err := r.OpenDataset(context.Background(), name, nil)
	must(t, err)
	return r, ds
}

// TestVirtualSourceDeletedOrMoved: a source dataset deleted, moved away,
// or replaced at its name by another dataset moved or created there, in
// another file or in the virtual file itself ("."). After Refresh the
// follower reads what a fresh open reads: fill for a missing source, the
// new dataset's values for a new one. Before, it kept reading the old
// dataset, or failed every read with ErrDeleted.
func TestVirtualSourceDeletedOrMoved(t *testing.T) {
	ctx := context.Background()
	t.Run("other file", func(t *testing.T) {
		dir := t.TempDir()
		a, b, vp := filepath.Join(dir, "a.scc"), filepath.Join(dir, "b.scc"), filepath.Join(dir, "v.scc")
		lcCreate(t, a, 4, 100)
		lcCreate(t, b, 4, 200)
		lcVirtual(t, vp, 2, lcColumns("a.scc", "b.scc"))
		r, v := lcOpenFollower(t, vp, "v")
		lcFollow(t, "start", r, v, vp)
		step := func(state string, op func(w *File)) {
			t.Helper()
			w, err := Open(ctx, a, &Options{NoSync: true})
			must(t, err)
			op(w)
			must(t, w.Close(ctx))
			lcAppend(t, b, 1, 200)
			lcFollow(t, state, r, v, vp)
		}
		step("source moved away", func(w *File) { must(t, w.Move(ctx, "frames", "old")) })
		step("another dataset created at its name", func(w *File) {
			ds, err := w.CreateDataset(ctx, "frames", lcSpec)
			must(t, err)
			lcRows(t, ds, 0, 3, 300)
		})
		step("source deleted", func(w *File) { must(t, w.Delete(ctx, "frames", nil)) })
		step("another dataset moved to its name", func(w *File) { must(t, w.Move(ctx, "old", "frames")) })
		step("deleted and recreated", func(w *File) {
			must(t, w.Delete(ctx, "frames", nil))
			ds, err := w.CreateDataset(ctx, "frames", lcSpec)
			must(t, err)
			lcRows(t, ds, 0, 6, 400)
		})
	})
	t.Run("same file", func(t *testing.T) {
		dir := t.TempDir()
		vp := filepath.Join(dir, "v.scc")
		w, err := Create(ctx, vp, &Options{NoSync: true})
		must(t, err)
		defer w.Close(ctx)
		src, err := w.CreateDataset(ctx, "frames", lcSpec)
		must(t, err)
		lcRows(t, src, 0, 4, 100)
		wv, err := w.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
			Fill: []byte{7, 0, 0, 0}, Mappings: lcColumns(".")})
		must(t, err)
		must(t, w.Flush(ctx))
		r, v := lcOpenFollower(t, vp, "v")
		lcFollow(t, "start", r, v, vp)
		step := func(state string, op func()) {
			t.Helper()
			op()
			must(t, w.Flush(ctx))
			must(t, w.Refresh(ctx))
			got := lcFollow(t, state, r, v, vp)
			// The writer's own view of its virtual dataset agrees.
			lcSame(t, state+" (the writer's view)", lcRead(wv), got)
		}
		step("source moved away", func() { must(t, w.Move(ctx, "frames", "old")) })
		step("another dataset created at its name", func() {
			ds, err := w.CreateDataset(ctx, "frames", lcSpec)
			must(t, err)
			lcRows(t, ds, 0, 3, 300)
		})
		step("source deleted", func() { must(t, w.Delete(ctx, "frames", nil)) })
		step("another dataset moved to its name", func() { must(t, w.Move(ctx, "old", "frames")) })
		step("deleted and recreated", func() {
			must(t, w.Delete(ctx, "frames", nil))
			ds, err := w.CreateDataset(ctx, "frames", lcSpec)
			must(t, err)
			lcRows(t, ds, 0, 6, 400)
		})
	})
}

// TestVirtualSourceReplaced: a source's writer restarts with Create on
// the same path (a new file), or an older writer rewrites the file in
// place (a new file id): the follower's next Refresh opens the new file,
// and the other source's new rows keep coming. Before, the first Refresh
// served the old file's values and every later one failed ErrCorrupt
// ("file was replaced"), the other source's rows never seen.
func TestVirtualSourceReplaced(t *testing.T) {
	dir := t.TempDir()
	a, b, vp := filepath.Join(dir, "a.scc"), filepath.Join(dir, "b.scc"), filepath.Join(dir, "v.scc")
	lcCreate(t, a, 4, 100)
	lcCreate(t, b, 4, 200)
	lcVirtual(t, vp, 2, lcColumns("a.scc", "b.scc"))
	r, v := lcOpenFollower(t, vp, "v")
	lcFollow(t, "start", r, v, vp)
	for round := range 3 {
		lcCreate(t, a, uint64(2+round), 500+uint32(round)*100)
		lcAppend(t, b, 1, 200)
		got := lcFollow(t, fmt.Sprintf("round %d: replaced by Create", round), r, v, vp)
		if got.shape[0] != uint64(5+round) {
			t.Fatalf("round %d: extent %v, want the other source's %d rows", round, got.shape, 5+round)
		}
		lcAppend(t, a, 1, 900)
		lcFollow(t, fmt.Sprintf("round %d: the new file appended to", round), r, v, vp)
	}
	// Rewritten in place: same inode, another file id.
	img := filepath.Join(dir, "img.scc")
	lcCreate(t, img, 7, 1000)
	data, err := os.ReadFile(img)
	must(t, err)
	must(t, os.WriteFile(a, data, 0o644))
	lcAppend(t, b, 1, 200)
	lcFollow(t, "rewritten in place", r, v, vp)
	lcAppend(t, b, 1, 200)
	lcFollow(t, "after the rewrite", r, v, vp)
}

// fdCount is the number of descriptors the process holds.
func fdCount(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(es)
}

// TestVirtualSelfByPathNoLeak: a virtual dataset naming its own file by
// path reads it as "." does. Before, the follower opened one more nested
// read-only File at every Refresh (one more descriptor each), and error
// chains grew as deep.
func TestVirtualSelfByPathNoLeak(t *testing.T) {
	ctx := context.Background()
	vp := filepath.Join(t.TempDir(), "v.scc")
	w, err := Create(ctx, vp, &Options{NoSync: true})
	must(t, err)
	defer w.Close(ctx)
	src, err := w.CreateDataset(ctx, "frames", lcSpec)
	must(t, err)
	lcRows(t, src, 0, 2, 100)
	// A virtual dataset whose source (by path) is virtual fails its reads
	// at every Refresh: its error must not grow either. Made before its
	// source exists, which creation therefore cannot refuse.
	_, err = w.CreateVirtualDataset(ctx, "bad", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Mappings: []VirtualMapping{{Virtual: lcColumns("")[0].Virtual, File: "v.scc", Dataset: "v", Source: lcColumns("")[0].Source}}})
	must(t, err)
	_, err = w.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Mappings: lcColumns("v.scc")})
	must(t, err)
	must(t, w.Flush(ctx))
	r, v := lcOpenFollower(t, vp, "v")
	var fds, errLen int
	for i := range 50 {
		n := src.Shape()[0]
		lcRows(t, src, n, n+1, 100)
		must(t, w.Flush(ctx))
		got := lcFollow(t, fmt.Sprintf("refresh %d", i), r, v, vp)
		if got.shape[0] != n+1 {
			t.Fatalf("refresh %d: extent %v, want %d rows", i, got.shape, n+1)
		}
		d, err := r.OpenDataset(ctx, "bad", nil)
		if err == nil {
			err = lcRead(d).err
			d.Close(ctx)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("refresh %d: the virtual dataset over a virtual source: %v, want ErrInvalid", i, err)
		}
		if i == 0 {
			fds, errLen = fdCount(t), len(fmt.Sprint(err))
			continue
		}
		if n := fdCount(t); n > fds {
			t.Fatalf("refresh %d: %d descriptors, %d after the first", i, n, fds)
		}
		if n := len(fmt.Sprint(err)); n > errLen {
			t.Fatalf("refresh %d: the failing dataset's error grew from %d to %d bytes: %v", i, errLen, n, err)
		}
	}
	r.virt.mu.Lock()
	defer r.virt.mu.Unlock()
	for _, sf := range r.virt.files {
		if sf.opened.Load() {
			t.Fatalf("the follower opened its own file again as source %s", sf.name)
		}
	}
}

// TestVirtualSelfSourcedIsolated: a virtual dataset that maps itself is
// refused at creation; one whose source became virtual later (which
// creation could not see) fails its own reads, while the file's Refresh
// and its other virtual datasets go on following. Before, every Refresh
// failed and the other virtual datasets stopped following.
func TestVirtualSelfSourcedIsolated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	vp, a, x := filepath.Join(dir, "v.scc"), filepath.Join(dir, "a.scc"), filepath.Join(dir, "x.scc")
	lcCreate(t, a, 2, 100)
	lcCreate(t, x, 2, 100)
	w, err := Create(ctx, vp, &Options{NoSync: true})
	must(t, err)
	for _, file := range []string{".", "", "v.scc", vp} {
		_, err := w.CreateVirtualDataset(ctx, "self", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
			Mappings: []VirtualMapping{{Virtual: lcColumns("")[0].Virtual, File: file, Dataset: "self", Source: lcColumns("")[0].Source}}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "itself") {
			t.Fatalf("a virtual dataset mapping itself through %q: %v, want ErrInvalid", file, err)
		}
	}
	_, err = w.CreateVirtualDataset(ctx, "v1", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Mappings: []VirtualMapping{{Virtual: lcColumns("")[0].Virtual, File: "x.scc", Dataset: "x", Source: lcColumns("")[0].Source}}})
	must(t, err)
	_, err = w.CreateVirtualDataset(ctx, "v2", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Mappings: lcColumns("a.scc")})
	must(t, err)
	must(t, w.Close(ctx))
	r, v1 := lcOpenFollower(t, vp, "v1")
	v2, err := r.OpenDataset(ctx, "v2", nil)
	must(t, err)
	// x.scc's "x" appears, virtual.
	xf, err := Open(ctx, x, &Options{NoSync: true})
	must(t, err)
	_, err = xf.CreateVirtualDataset(ctx, "x", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Mappings: lcColumns("x.scc")})
	must(t, err)
	must(t, xf.Close(ctx))
	for round := range 5 {
		lcAppend(t, a, 1, 100)
		got := lcFollow(t, fmt.Sprintf("round %d: v2", round), r, v2, vp)
		if got.shape[0] != uint64(3+round) {
			t.Fatalf("round %d: v2 has %v rows, want %d", round, got.shape, 3+round)
		}
		if err := lcRead(v1).err; !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "itself virtual") {
			t.Fatalf("round %d: v1 over a virtual source: %v, want ErrInvalid", round, err)
		}
		lcSame(t, fmt.Sprintf("round %d: v1", round), lcRead(v1), lcFresh(vp, "v1"))
	}
}

// lcRemove removes path, if it is there.
func lcRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// lcUnborn writes at path what a creator killed before its first commit
// leaves: a file image with neither superblock slot written.
func lcUnborn(t *testing.T, path string, size int) {
	t.Helper()
	img := path + ".img"
	lcCreate(t, img, 3, 0)
	data, err := os.ReadFile(img)
	must(t, err)
	must(t, os.Remove(img))
	data = data[:min(size, len(data))]
	clear(data[:min(len(data), format.DataStart)])
	must(t, os.WriteFile(path, data, 0o644))
}

// TestVirtualSourceBeingCreated: while a source file is being created
// (empty, or cut short before its first superblock), the follower's
// Refresh and a fresh open read it as a missing source (fill); once its
// writer has created it, both read its rows. Before, both failed
// ErrCorrupt.
func TestVirtualSourceBeingCreated(t *testing.T) {
	dir := t.TempDir()
	a, b, vp := filepath.Join(dir, "a.scc"), filepath.Join(dir, "b.scc"), filepath.Join(dir, "v.scc")
	lcCreate(t, b, 2, 200)
	lcVirtual(t, vp, 2, lcColumns("a.scc", "b.scc"))
	r, v := lcOpenFollower(t, vp, "v")
	lcFollow(t, "no source file", r, v, vp)
	must(t, os.WriteFile(a, nil, 0o644))
	lcAppend(t, b, 1, 200)
	if got := lcFollow(t, "an empty source file", r, v, vp); got.err != nil {
		t.Fatalf("an empty source file: %v, want fill", got.err)
	}
	for _, size := range []int{100, format.SlotB + 10, format.DataStart + 100, 1 << 20} {
		lcUnborn(t, a, size)
		lcAppend(t, b, 1, 200)
		if got := lcFollow(t, fmt.Sprintf("a source cut short at %d bytes before its first commit", size), r, v, vp); got.err != nil {
			t.Fatalf("a source cut short before its first commit: %v, want fill", got.err)
		}
	}
	lcCreate(t, a, 5, 100)
	got := lcFollow(t, "the source created", r, v, vp)
	if got.err != nil || got.vals[0] != lcVal(100, 0, 0) {
		t.Fatalf("the source created: %v %v", got.shape, got.err)
	}
}

// TestVirtualSourceLifecycle: one source goes through every state a
// facility's files go through while the other source's writer appends
// and the follower refreshes; in each the follower reads what a fresh
// open reads, and nothing hangs (a FIFO is refused, not opened).
func TestVirtualSourceLifecycle(t *testing.T) {
	dir := t.TempDir()
	a, b, vp := filepath.Join(dir, "a.scc"), filepath.Join(dir, "b.scc"), filepath.Join(dir, "v.scc")
	lcCreate(t, b, 2, 200)
	lcVirtual(t, vp, 2, lcColumns("a.scc", "b.scc"))
	r, v := lcOpenFollower(t, vp, "v")
	states := []struct {
		name string
		make func()
	}{
		{"missing", func() {}},
		{"created", func() { lcCreate(t, a, 3, 100) }},
		{"appended", func() { lcAppend(t, a, 2, 100) }},
		{"deleted", func() { lcRemove(t, a) }},
		{"killed mid-create", func() { lcUnborn(t, a, format.DataStart+64) }},
		{"recreated", func() { lcCreate(t, a, 4, 300) }},
		{"moved away", func() { must(t, os.Rename(a, a+".moved")) }},
		{"moved back", func() { must(t, os.Rename(a+".moved", a)) }},
		{"replaced", func() { lcCreate(t, a, 2, 500) }},
		{"truncated", func() {
			fi, err := os.Stat(a)
			must(t, err)
			must(t, os.Truncate(a, fi.Size()/2))
		}},
		{"recreated after truncation", func() { lcRemove(t, a); lcCreate(t, a, 3, 600) }},
		{"symlink loop", func() {
			lcRemove(t, a)
			must(t, os.Symlink("a.scc", a))
		}},
		{"recreated after the loop", func() { lcRemove(t, a); lcCreate(t, a, 1, 700) }},
		{"FIFO", func() {
			lcRemove(t, a)
			if err := syscall.Mkfifo(a, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}},
		{"recreated after the FIFO", func() { lcRemove(t, a); lcCreate(t, a, 2, 800) }},
		{"a symlink to a file", func() {
			must(t, os.Rename(a, a+".real"))
			must(t, os.Symlink("a.scc.real", a))
		}},
		{"the symlink's target appended to", func() { lcAppend(t, a+".real", 1, 800) }},
	}
	for _, s := range states {
		s.make()
		lcAppend(t, b, 1, 200)
		lcFollow(t, s.name, r, v, vp)
		lcAppend(t, b, 1, 200)
		lcFollow(t, s.name+", again", r, v, vp)
	}
}

// TestVirtualSourceLifecycleLive is TestVirtualSourceLifecycle with a
// writer process appending frames to another source all along, reader
// goroutines reading both virtual datasets while the follower refreshes
// and the source changes under them (under -race: the openings a Refresh
// lets go while reads use them). The follower's view of the changing
// source equals a fresh open's after every Refresh; its view of the
// written one never fails and only grows, every frame it shows the
// writer's.
func TestVirtualSourceLifecycleLive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, vp := filepath.Join(dir, "a.scc"), filepath.Join(dir, "v.scc")
	const frames = 400
	f, err := Create(ctx, vp, &Options{NoSync: true})
	must(t, err)
	_, err = f.CreateVirtualDataset(ctx, "va", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Fill: []byte{7, 0, 0, 0}, Mappings: lcColumns("a.scc")})
	must(t, err)
	_, err = f.CreateVirtualDataset(ctx, "vb", VirtualSpec{Type: Uint32, Shape: []uint64{0, vdsSide, vdsSide},
		MaxShape: []uint64{Unlimited, vdsSide, vdsSide}, Mappings: roundRobin(1, vdsSide, vdsSide, false)})
	must(t, err)
	must(t, f.Close(ctx))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SCC_SWMR_ROLE=vds-writer", "SCC_SWMR_PATH="+filepath.Join(dir, "w0.scc"),
		"SCC_VDS_INDEX=0", "SCC_VDS_WRITERS=1", "SCC_VDS_FRAMES="+strconv.Itoa(frames))
	cmd.Stderr = os.Stderr
	cmd.Stdout = io.Discard
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()

	r, va := lcOpenFollower(t, vp, "va")
	vb, err := r.OpenDataset(ctx, "vb", nil)
	must(t, err)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// A source changing under the read may fail it, with
				// a sentinel, never a panic or an untyped error.
				if v := lcRead(va); v.err != nil && lcKind(v.err) == v.err {
					errs <- fmt.Errorf("va: untyped error %v", v.err)
					return
				}
				sh := vb.Shape()
				buf := make([]uint32, sh[0]*vdsSide*vdsSide)
				if err := ReadSlice(ctx, vb, All(sh), buf); err != nil && !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrStale) {
					errs <- fmt.Errorf("vb: %v", err)
					return
				}
			}
		}()
	}
	states := []struct {
		name string
		make func()
	}{
		{"created", func() { lcCreate(t, a, 3, 100) }},
		{"appended", func() { lcAppend(t, a, 2, 100) }},
		{"deleted", func() { lcRemove(t, a) }},
		{"killed mid-create", func() { lcUnborn(t, a, format.DataStart+64) }},
		{"recreated", func() { lcCreate(t, a, 4, 300) }},
		{"replaced", func() { lcCreate(t, a, 2, 500) }},
		{"truncated", func() {
			fi, err := os.Stat(a)
			must(t, err)
			must(t, os.Truncate(a, fi.Size()/2))
		}},
		{"symlink loop", func() { lcRemove(t, a); must(t, os.Symlink("a.scc", a)) }},
		{"FIFO", func() { lcRemove(t, a); must(t, syscall.Mkfifo(a, 0o644)) }},
		{"recreated at last", func() { lcRemove(t, a); lcCreate(t, a, 6, 900) }},
	}
	var seen uint64
	for round := 0; ; round++ {
		s := states[round%len(states)]
		if round >= len(states) {
			select {
			case err := <-exited:
				exited <- err
				s = states[len(states)-1]
			default:
			}
		}
		s.make()
		lcFollow(t, fmt.Sprintf("round %d: %s", round, s.name), r, va, vp)
		n := vb.Shape()[0]
		if n < seen {
			t.Fatalf("round %d: the written source's extent went back from %d to %d", round, seen, n)
		}
		seen = n
		buf := make([]uint32, n*vdsSide*vdsSide)
		must(t, ReadSlice(ctx, vb, All([]uint64{n, vdsSide, vdsSide}), buf))
		for g := uint64(0); g < n; g++ {
			if !slices.Equal(buf[g*vdsSide*vdsSide:(g+1)*vdsSide*vdsSide], frameData(g, vdsSide*vdsSide)) {
				t.Fatalf("round %d: frame %d of the written source is not the writer's", round, g)
			}
		}
		if round >= len(states) && s.name == "recreated at last" && len(exited) > 0 {
			break
		}
		if round > 50*len(states) {
			t.Fatal("the writer process did not finish")
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	must(t, <-exited)
	exited <- nil
	must(t, r.Refresh(ctx))
	if n := vb.Shape()[0]; n != frames {
		t.Fatalf("after the writer finished: %d frames, want %d", n, frames)
	}
}

// TestVirtualPrintfSourceLifecycle: the sources of a printf mapping (one
// file per block) appear, are cut short while created, deleted and
// recreated; the follower's extent and values equal a fresh open's after
// every Refresh. Before, a block found once stayed found: a deleted
// newest block kept the follower's extent where a fresh open's ended
// before it.
func TestVirtualPrintfSourceLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	vp := filepath.Join(dir, "v.scc")
	blk := func(k int) string { return filepath.Join(dir, fmt.Sprintf("p%d.scc", k)) }
	f, err := Create(ctx, vp, &Options{NoSync: true})
	must(t, err)
	_, err = f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0, lcW}, MaxShape: []uint64{Unlimited, lcW},
		Fill: []byte{7, 0, 0, 0}, Mappings: []VirtualMapping{{
			Virtual: Hyperslab([]uint64{0, 0}, []uint64{2, 1}, []uint64{Unlimited, 1}, []uint64{2, lcW}),
			File:    "p%b.scc", Dataset: "frames", Source: Box([]uint64{0, 0}, []uint64{2, lcW}),
		}}})
	must(t, err)
	must(t, f.Close(ctx))
	r, v := lcOpenFollower(t, vp, "v")
	steps := []struct {
		name string
		make func()
		rows uint64
	}{
		{"blocks 0-2 created", func() {
			for k := range 3 {
				lcCreate(t, blk(k), 2, uint32(100*k))
			}
		}, 6},
		{"block 3 cut short while created", func() { lcUnborn(t, blk(3), format.DataStart+64) }, 6},
		{"block 3 created", func() { lcCreate(t, blk(3), 2, 300) }, 8},
		{"block 3 deleted", func() { lcRemove(t, blk(3)) }, 6},
		{"block 2 moved away", func() { must(t, os.Rename(blk(2), blk(2)+".old")) }, 4},
		{"block 2 moved back", func() { must(t, os.Rename(blk(2)+".old", blk(2))) }, 6},
		{"block 2 replaced", func() { lcCreate(t, blk(2), 1, 900) }, 6},
	}
	for _, s := range steps {
		s.make()
		got := lcFollow(t, s.name, r, v, vp)
		if got.err != nil || got.shape[0] != s.rows {
			t.Fatalf("%s: extent %v (%v), want %d rows", s.name, got.shape, got.err, s.rows)
		}
	}
}
