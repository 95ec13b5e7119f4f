package engine

import (
	"fmt"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// virtualCrashWorkload is crashWorkload with virtual datasets: three
// virtual datasets over datasets of the same file — one following an
// unlimited source along its growing and shrinking dimension, one
// gathering every third row of a fixed-size source, one over a source
// created only in a later commit (fill until then) — made over several
// commits among writes, extent changes and attributes of the file and of
// a virtual dataset. The models of the virtual datasets derive from those
// of their sources, so a reopened state must read, through each virtual
// dataset, what its sources held in that same state.
var virtualCrashWorkload = defineWorkload(21, &Options{CacheConfig: cache.Config{QuiescentBytes: 6 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"src":  {Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"fa":   {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}},
		"late": {Type: Uint16, Shape: []uint64{5, 5}, Chunk: []uint64{3, 3}, Fill: []byte{8, 0}},
	}
	attr := func(i int) func() error {
		return func() error {
			if err := w.f.SetAttr(w.ctx, fmt.Sprintf("a%d", i%2), StringAttr(fmt.Sprintf("value %d", i))); err != nil {
				return err
			}
			return w.sets["vhalf"].SetAttr(w.ctx, "note", ScalarAttr(uint32(i)))
		}
	}
	// vhalf[r][c] = src[r][5+c], as many rows as src has.
	vhalf := func() error {
		return w.createVirtual("vhalf", VirtualSpec{Type: Uint16, Shape: []uint64{0, 5}, MaxShape: []uint64{Unlimited, 5}, Mappings: []VirtualMapping{{
			Virtual: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 5}),
			Dataset: "src",
			Source:  Hyperslab([]uint64{0, 5}, nil, []uint64{Unlimited, 1}, []uint64{1, 5}),
		}}}, func(refs map[string]*refArray) *refArray {
			src := refs["src"]
			v := newRef([]uint64{src.dims[0], 5}, 2, nil)
			for r := uint64(0); r < src.dims[0]; r++ {
				for c := uint64(0); c < 5; c++ {
					v.set([]uint64{r, c}, src.at([]uint64{r, 5 + c}))
				}
			}
			return v
		})
	}
	// vfix[i][c] = fa[3i][c].
	vfix := func() error {
		return w.createVirtual("vfix", VirtualSpec{Type: Int32, Shape: []uint64{3, 9}, Fill: []byte{9, 9, 9, 9}, Mappings: []VirtualMapping{{
			Virtual: Box([]uint64{0, 0}, []uint64{3, 9}),
			File:    ".",
			Dataset: "fa",
			Source:  Hyperslab([]uint64{0, 0}, []uint64{3, 1}, []uint64{3, 1}, []uint64{1, 9}),
		}}}, func(refs map[string]*refArray) *refArray {
			v := newRef([]uint64{3, 9}, 4, []byte{9, 9, 9, 9})
			for i := uint64(0); i < 3; i++ {
				for c := uint64(0); c < 9; c++ {
					v.set([]uint64{i, c}, refs["fa"].at([]uint64{3 * i, c}))
				}
			}
			return v
		})
	}
	// vlate[r][c] = late[1+r][1+c] once late exists, its fill before.
	vlate := func() error {
		return w.createVirtual("vlate", VirtualSpec{Type: Uint16, Shape: []uint64{4, 4}, Fill: []byte{5, 5}, Mappings: []VirtualMapping{{
			Virtual: Box([]uint64{0, 0}, []uint64{4, 4}),
			Dataset: "late",
			Source:  Box([]uint64{1, 1}, []uint64{4, 4}),
		}}}, func(refs map[string]*refArray) *refArray {
			v := newRef([]uint64{4, 4}, 2, []byte{5, 5})
			if late := refs["late"]; late != nil {
				for r := uint64(0); r < 4; r++ {
					for c := uint64(0); c < 4; c++ {
						v.set([]uint64{r, c}, late.at([]uint64{1 + r, 1 + c}))
					}
				}
			}
			return v
		})
	}
	return steps(
		func() error { return w.create(specs, "src", "fa") },
		func() error { return w.writeRandom(4) },
		vhalf, attr(0),
		w.flush,
		func() error { return w.writeRandom(4) },
		vfix, vlate, attr(1),
		w.flush,
		func() error { return w.create(specs, "late") },
		func() error { return w.writeRandom(4) },
		func() error { return w.setExtent("src", []uint64{3, 10}) },
		attr(2),
		w.flush,
		func() error { return w.setExtent("src", []uint64{9, 10}) },
		func() error { return w.writeRandom(5) },
		attr(3),
	)
})

// at is the element at coord.
func (r *refArray) at(coord []uint64) []byte {
	i := r.linear(coord) * uint64(r.elemSize)
	return r.data[i : i+uint64(r.elemSize)]
}

// set stores the element at coord.
func (r *refArray) set(coord []uint64, b []byte) { copy(r.at(coord), b) }

// TestVirtualCrashAtEveryWrite is TestCrashAtEveryWrite for a file with
// virtual datasets: every crash image opens at one committed state, passes
// the checker, and its virtual datasets read what their sources held in
// that state.
func TestVirtualCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, virtualCrashWorkload, 1)
}

// TestVirtualFaultAtEveryOperation is TestFaultAtEveryOperation for the
// same workload.
func TestVirtualFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, virtualCrashWorkload, 2)
}
