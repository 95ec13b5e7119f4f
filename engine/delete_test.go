package engine

import (
	"bytes"
	"errors"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

func fillBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func mustWrite(t *testing.T, d *Dataset, buf []byte) {
	t.Helper()
	if err := d.Write(t.Context(), All(d.Shape()), buf); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, d *Dataset) []byte {
	t.Helper()
	buf := make([]byte, d.Shape()[0])
	if err := d.Read(t.Context(), All(d.Shape()), buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestDeleteMoveRules: the errors Delete and Move owe: a missing name,
// a group that is not empty without Recursive, a move into itself, onto
// an existing name or into a missing group, and the root.
func TestDeleteMoveRules(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	defer f.Close(ctx)
	for _, g := range []string{"a", "a/b"} {
		if _, err := f.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.CreateDataset(ctx, "a/x", smallSpec); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"delete missing":      f.Delete(ctx, "nope", nil),
		"delete non-empty":    f.Delete(ctx, "a", nil),
		"delete root":         f.Delete(ctx, "/", nil),
		"move into itself":    f.Move(ctx, "a", "a/b/c"),
		"move onto itself":    f.Move(ctx, "a", "/a"),
		"move onto existing":  f.Move(ctx, "a/x", "a/b"),
		"move missing parent": f.Move(ctx, "a/x", "zz/x"),
		"move missing":        f.Move(ctx, "q", "r"),
		"move under dataset":  f.Move(ctx, "a/b", "a/x/b"),
	} {
		want := map[string]error{
			"delete missing": ErrNotFound, "delete non-empty": ErrInvalid, "delete root": ErrInvalid,
			"move into itself": ErrInvalid, "move onto itself": ErrInvalid, "move onto existing": ErrExists,
			"move missing parent": ErrNotFound, "move missing": ErrNotFound, "move under dataset": ErrInvalid,
		}[name]
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	// Nothing changed.
	if got := members(t, f.Group); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("root %v", got)
	}
	if err := f.Delete(ctx, "a/b", nil); err != nil { // empty: no option needed
		t.Fatal(err)
	}
	if err := f.Delete(ctx, "a", &DeleteOptions{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if got := members(t, f.Group); len(got) != 0 {
		t.Fatalf("root after delete %v", got)
	}
	if _, err := f.OpenDataset(ctx, "a/x", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open deleted: %v", err)
	}
}

// TestMoveKeepsHandles: a moved group takes its subtree along, the open
// handles of its datasets keep working under their new names, and the
// move is what the next commit records.
func TestMoveKeepsHandles(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	if _, err := f.CreateDataset(ctx, "a/b/d", smallSpec); err != nil {
		t.Fatal(err)
	}
	e, err := f.CreateDataset(ctx, "a/e", smallSpec)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, e, fillBytes(8, 3))
	g, err := f.OpenGroup(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetAttr(ctx, "k", StringAttr("v")); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, e, fillBytes(8, 9)) // dirty across the move
	if err := f.Move(ctx, "a", "m"); err != nil {
		t.Fatal(err)
	}
	if e.Path() != "/m/e" || e.Name() != "e" || g.Path() != "/m/b" {
		t.Fatalf("handles after move: %q %q", e.Path(), g.Path())
	}
	if got := mustRead(t, e); !bytes.Equal(got, fillBytes(8, 9)) {
		t.Fatalf("moved handle reads %v", got)
	}
	if err := f.Move(ctx, "m/e", "m/b/e2"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, drv, nil)
	defer f.Close(ctx)
	if _, err := f.OpenGroup(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old group: %v", err)
	}
	d, err := f.OpenDataset(ctx, "m/b/e2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, d); !bytes.Equal(got, fillBytes(8, 9)) {
		t.Fatalf("after reopen reads %v", got)
	}
	g, err = f.OpenGroup(ctx, "m/b")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := g.Attr("k"); err != nil || !v.Equal(StringAttr("v")) {
		t.Fatalf("moved group attribute %v %v", v, err)
	}
	if _, err := f.OpenDataset(ctx, "m/b/d", nil); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteFreesAtCommit: a deleted dataset's handle answers ErrDeleted,
// its dirty chunks are never written, and its space is reused once the
// commit that drops it is durable: recreating the same data after that
// does not grow the file.
func TestDeleteFreesAtCommit(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64 << 10}, Chunk: []uint64{4 << 10}}
	d, err := f.CreateDataset(ctx, "g/big", spec)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d, fillBytes(64<<10, 1))
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	eof0 := f.sb.Load().EOF
	mustWrite(t, d, fillBytes(64<<10, 2)) // dirty, never to be written
	if err := f.Delete(ctx, "g", &DeleteOptions{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, All(spec.Shape), fillBytes(64<<10, 3)); !errors.Is(err, ErrDeleted) {
		t.Fatalf("write after delete: %v, want ErrDeleted", err)
	}
	if err := d.Read(ctx, All(spec.Shape), make([]byte, 64<<10)); !errors.Is(err, ErrDeleted) {
		t.Fatalf("read after delete: %v, want ErrDeleted", err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	eof := f.sb.Load().EOF
	if grew := eof - eof0; grew > 4<<10 {
		t.Fatalf("the file grew by %d bytes at the delete's commit: the deleted dataset's dirty chunks were written", grew)
	}
	d2, err := f.CreateDataset(ctx, "big2", spec)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d2, fillBytes(64<<10, 4))
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if grew := f.sb.Load().EOF - eof; grew > 16<<10 {
		t.Fatalf("the file grew by %d bytes: the deleted dataset's space was not reused", grew)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, drv, nil)
	defer f.Close(ctx)
	if got := f.datasetNames(); len(got) != 1 || got[0] != "big2" {
		t.Fatalf("datasets %v", got)
	}
	d2, err = f.OpenDataset(ctx, "big2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, d2); !bytes.Equal(got, fillBytes(64<<10, 4)) {
		t.Fatal("the recreated dataset reads other data")
	}
}
