package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// remove deletes path (a dataset, or a group with everything in it) from
// the file and the model.
func (w *wlRun) remove(path string) error {
	if err := w.f.Delete(w.ctx, path, &DeleteOptions{Recursive: true}); err != nil {
		return err
	}
	w.names = slices.DeleteFunc(w.names, func(n string) bool {
		if n == path || strings.HasPrefix(n, path+"/") {
			delete(w.refs, n)
			delete(w.sets, n)
			return true
		}
		return false
	})
	return nil
}

// move renames from (and everything under it) to to, in the file and the
// model; the open handles follow.
func (w *wlRun) move(from, to string) error {
	if err := w.f.Move(w.ctx, from, to); err != nil {
		return err
	}
	for i, n := range w.names {
		if n == from || strings.HasPrefix(n, from+"/") {
			m := to + n[len(from):]
			w.refs[m], w.sets[m] = w.refs[n], w.sets[n]
			delete(w.refs, n)
			delete(w.sets, n)
			w.names[i] = m
		}
	}
	return nil
}

// deleteMoveWorkload fills datasets in groups, deletes one and moves a
// group across commits, then fills a new dataset that reuses the freed
// space, with a reopen in between.
var deleteMoveWorkload = defineWorkload(33, &Options{CacheConfig: cache.Config{QuiescentBytes: 6 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"g/a":   {Type: Uint16, Shape: []uint64{12, 10}, Chunk: []uint64{4, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"g/s/b": {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}},
		"c":     {Type: Uint8, Shape: []uint64{40}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{8}},
		"h/d":   {Type: Uint16, Shape: []uint64{12, 10}, Chunk: []uint64{4, 5}},
	}
	return steps(
		func() error { return w.create(specs, "g/a", "g/s/b", "c") },
		func() error { return w.writeRandom(6) },
		w.flush,
		func() error { return w.remove("g/a") },
		func() error { return w.writeRandom(3) },
		w.flush,
		func() error { return w.move("g", "m") },
		func() error { return w.create(specs, "h/d") },
		func() error { return w.writeRandom(6) },
		w.flush,
		w.reopen,
		func() error { return w.remove("m") },
		func() error { return w.writeRandom(4) },
	)
})

// TestCrashDeleteMove cuts the power at every write of a workload that
// deletes and moves datasets and groups: every crash image opens in a
// committed state (names and data), and Check passes.
func TestCrashDeleteMove(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, deleteMoveWorkload, 1)
}
