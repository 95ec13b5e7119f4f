package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestRaceOwnersEveryLayout runs concurrent owners over one dataset of each
// layout: each goroutine owns a band of rows of every dataset, writes it
// (erases too, on the sparse one), reads it back at once and checks it
// against its own model, while other goroutines flush, set attributes and
// read the whole file, a cache small enough to keep evicting. After Close
// the reopened file must hold each owner's last write, every attribute,
// and pass Check; with and without a cache image.
func TestRaceOwnersEveryLayout(t *testing.T) {
	defer verifyNoLeaks(t)
	runs, rounds := 2, 40
	if long() {
		runs, rounds = 20, 200
	}
	for _, image := range []bool{false, true} {
		for run := 0; run < runs; run++ {
			t.Run(fmt.Sprintf("image=%v/run=%d", image, run), func(t *testing.T) {
				ownersRun(t, uint64(run), rounds, image)
			})
		}
	}
}

// ownerSpecs: every dataset has ownerCount bands of ownerRows rows.
const (
	ownerCount = 4
	ownerRows  = 3
)

var ownerSpecs = []struct {
	name string
	spec DatasetSpec
}{
	{"dense", DatasetSpec{Type: Uint16, Shape: []uint64{ownerCount * ownerRows, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}}},
	{"fixed", DatasetSpec{Type: Int32, Shape: []uint64{ownerCount * ownerRows, 8}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}}},
	{"contig", DatasetSpec{Type: Uint8, Shape: []uint64{ownerCount * ownerRows, 9000}, Layout: Contiguous}},
	{"sparse", DatasetSpec{Type: Uint16, Shape: []uint64{ownerCount * ownerRows, 10}, Chunk: []uint64{2, 5},
		Layout: Sparse, Fill: []byte{0xff, 0xff}, Filters: []Filter{Deflate(1)}}},
	{"vlen", DatasetSpec{Type: Uint8, Shape: []uint64{ownerCount * ownerRows, 6}, Chunk: []uint64{2, 3}, Layout: Vlen, Filters: []Filter{Zstd(1)}}},
}

func ownersRun(t *testing.T, seed uint64, rounds int, image bool) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 24 << 10}}
	if image {
		opts.Image = ImageOptions{Generate: true}
	}
	f := tCreate(t, mem, opts)
	sets := map[string]*Dataset{}
	models := map[string]*refArray{}
	for _, sp := range ownerSpecs {
		ds, err := f.CreateDataset(ctx, sp.name, sp.spec)
		must(t, err)
		sets[sp.name] = ds
		if sp.spec.Layout == Vlen {
			models[sp.name] = newVlenRef(sp.spec.Shape, 1)
		} else {
			models[sp.name] = newRef(sp.spec.Shape, sp.spec.Type.Size(), sp.spec.Fill)
		}
	}
	// Owners write disjoint rows of one shared model per dataset; the
	// model's rows are disjoint too, so each owner locks only for the
	// copy in and out (modelMu guards the models' slices, not the file).
	var modelMu sync.Mutex
	band := func(g int, rng *rand.Rand, dims []uint64) Selection {
		row := uint64(g*ownerRows) + rng.Uint64N(ownerRows)
		n := 1 + rng.Uint64N(uint64(g*ownerRows+ownerRows)-row)
		c0 := rng.Uint64N(dims[1])
		return Box([]uint64{row, c0}, []uint64{n, 1 + rng.Uint64N(dims[1]-c0)})
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := 0; g < ownerCount; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < rounds; i++ {
				sp := ownerSpecs[rng.IntN(len(ownerSpecs))]
				ds, m := sets[sp.name], models[sp.name]
				sel := band(g, rng, m.dims)
				if i%5 == 0 {
					sel = Box([]uint64{uint64(g * ownerRows), 0}, []uint64{ownerRows, m.dims[1]}) // the whole band
				}
				switch {
				case m.vlen != nil:
					vals := randomVlen(rng, int(sel.NumElements()), 1)
					if err := ds.WriteVlen(ctx, sel, vals); err != nil {
						t.Errorf("owner %d: WriteVlen: %v", g, err)
						return
					}
					modelMu.Lock()
					m.writeVlen(sel, vals)
					want := m.readVlen(sel)
					modelMu.Unlock()
					got, err := ds.ReadVlen(ctx, sel)
					if err != nil {
						t.Errorf("owner %d: ReadVlen: %v", g, err)
						return
					}
					if err := vlenDiff(got, want); err != nil {
						t.Errorf("owner %d: %s: %v", g, sp.name, err)
						return
					}
					continue
				case sp.spec.Layout == Sparse && rng.IntN(3) == 0:
					if err := ds.Erase(ctx, sel); err != nil {
						t.Errorf("owner %d: Erase: %v", g, err)
						return
					}
					modelMu.Lock()
					m.write(sel, fillBuf(m, sel))
					modelMu.Unlock()
				default:
					buf := randomBytes(rng, int(sel.NumElements())*m.elemSize)
					if sp.spec.Layout == Sparse {
						for j := 0; j < len(buf); j += m.elemSize {
							buf[j] &= 0x7f
						}
					}
					if err := ds.Write(ctx, sel, buf); err != nil {
						t.Errorf("owner %d: Write %s: %v", g, sp.name, err)
						return
					}
					modelMu.Lock()
					m.write(sel, buf)
					modelMu.Unlock()
				}
				modelMu.Lock()
				want := m.read(sel)
				modelMu.Unlock()
				got := make([]byte, len(want))
				if err := ds.Read(ctx, sel, got); err != nil {
					t.Errorf("owner %d: Read %s: %v", g, sp.name, err)
					return
				}
				if !bytes.Equal(got, want) {
					t.Errorf("owner %d: %s %v reads back other data than it wrote", g, sp.name, sel.hyper())
					return
				}
			}
		}(g)
	}
	// Beside the owners: commits, attribute changes, and whole-dataset
	// reads whose values must be whole elements of some write (checked at
	// the end; here only that they succeed).
	var side sync.WaitGroup
	side.Add(2)
	go func() {
		defer side.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := f.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			if err := f.SetAttr(ctx, fmt.Sprintf("a%d", i%7), StringAttr(fmt.Sprint(i))); err != nil {
				t.Errorf("SetAttr: %v", err)
				return
			}
		}
	}()
	go func() {
		defer side.Done()
		rng := rand.New(rand.NewPCG(seed, 99))
		for {
			select {
			case <-done:
				return
			default:
			}
			sp := ownerSpecs[rng.IntN(len(ownerSpecs))]
			m := models[sp.name]
			var err error
			if m.vlen != nil {
				_, err = sets[sp.name].ReadVlen(ctx, All(m.dims))
			} else {
				err = sets[sp.name].Read(ctx, All(m.dims), make([]byte, prod(m.dims)*uint64(m.elemSize)))
			}
			if err != nil {
				t.Errorf("reader: %s: %v", sp.name, err)
				return
			}
			if sp.spec.Layout == Sparse {
				if _, _, err := sets[sp.name].ReadDefined(ctx, All(m.dims)); err != nil {
					t.Errorf("reader: ReadDefined: %v", err)
					return
				}
			}
		}
	}()
	wg.Wait()
	close(done)
	side.Wait()
	if t.Failed() {
		must(t, f.Close(ctx))
		return
	}
	attrs := map[string]string{}
	for _, a := range attrsOf(t, f) {
		attrs[a.Name], _ = a.Value.Str()
	}
	must(t, f.Close(ctx))
	if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
		t.Fatalf("check: %v", err)
	}
	r := &tRun{t: t, label: "reopened", ctx: ctx, drv: mem, opts: &Options{ReadOnly: true}}
	r.open()
	defer r.f.Close(ctx)
	if err := r.matches(tState{refs: models, attrs: attrs}); err != nil {
		t.Fatal(err)
	}
}
