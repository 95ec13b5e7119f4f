package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestCheckLostCommit: a damaged newest superblock slot makes the file
// open at the previous generation (right), and Check reports the lost
// commit as a PROBLEM naming its generation; a file committed once, whose
// other slot was never written, checks clean.
func TestCheckLostCommit(t *testing.T) {
	ctx := t.Context()
	// A file as Create leaves it: generation 1 in slot B, slot A never
	// written.
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	fresh := vfd.NewMem()
	if _, err := fresh.WriteAt(bytes.Clone(mem.Bytes()), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := Check(ctx, "", &Options{Driver: fresh}); err != nil || r.SlotsValid != 1 || r.Generation != 1 {
		t.Fatalf("fresh file: %+v, %v; want clean at generation 1 with one slot", r, err)
	}

	build := func(t *testing.T) (*vfd.Mem, uint64) {
		drv := vfd.NewMem()
		f := tCreate(t, drv, nil, noCheck("a superblock slot is damaged on purpose"))
		if _, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		gen := f.Generation()
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if r, err := Check(ctx, "", &Options{Driver: drv}); err != nil || r.SlotsValid != 2 {
			t.Fatalf("intact file: %+v, %v", r, err)
		}
		return drv, gen
	}
	// The closing commit may have added one; the newest is what opens.
	newest := func(t *testing.T, drv *vfd.Mem) uint64 {
		ro, err := Open(ctx, "", &Options{Driver: drv, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close(ctx)
		return ro.Generation()
	}
	cases := []struct {
		name   string
		damage func(slot []byte)
		want   func(gen uint64) []string
	}{
		{"checksum", func(b []byte) { b[200] ^= 1 }, func(gen uint64) []string {
			return []string{fmt.Sprintf("generation %d is lost", gen), fmt.Sprintf("opens at generation %d", gen-1)}
		}},
		{"garbage", func(b []byte) {
			for i := range b {
				b[i] = byte(i*31 + 7)
			}
		}, func(gen uint64) []string {
			return []string{fmt.Sprintf("generation %d or later) may be lost", gen), fmt.Sprintf("opens at generation %d", gen-1)}
		}},
		{"blank", func(b []byte) { clear(b) }, func(gen uint64) []string {
			return []string{"blank", fmt.Sprintf("generation %d was committed there", gen)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			drv, _ := build(t)
			gen := newest(t, drv)
			off := format.SlotFor(gen)
			b := make([]byte, format.SlotSize)
			if _, err := drv.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			c.damage(b)
			if _, err := drv.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			if got := newest(t, drv); got != gen-1 {
				t.Fatalf("opens at generation %d, want %d", got, gen-1)
			}
			r, err := Check(ctx, "", &Options{Driver: drv})
			if !errors.Is(err, ErrCorrupt) || r == nil || r.Generation != gen-1 {
				t.Fatalf("Check = %+v, %v; want ErrCorrupt at generation %d", r, err, gen-1)
			}
			want := c.want(gen)
			if c.name == "blank" {
				// The blank slot is the newest's: it held gen, now nothing;
				// from the file's view the one that should hold gen-2's
				// successor is blank.
				want = []string{"blank"}
			}
			found := false
			for _, p := range r.Problems {
				ok := true
				for _, w := range want {
					ok = ok && strings.Contains(p, w)
				}
				found = found || ok
			}
			if !found {
				t.Fatalf("problems %q; want one containing %q", r.Problems, want)
			}
		})
	}
	t.Run("older", func(t *testing.T) {
		drv, _ := build(t)
		gen := newest(t, drv)
		off := format.SlotFor(gen - 1)
		b := make([]byte, format.SlotSize)
		if _, err := drv.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[200] ^= 1
		if _, err := drv.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		if got := newest(t, drv); got != gen {
			t.Fatalf("opens at generation %d, want %d", got, gen)
		}
		r, err := Check(ctx, "", &Options{Driver: drv})
		if !errors.Is(err, ErrCorrupt) || len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "is damaged") {
			t.Fatalf("damaged older slot: %+v, %v; want a PROBLEM", r, err)
		}
	})
}
