package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// deletePath deletes the dataset or group at p (Recursive) and drops what
// it held from the model.
func (w *wlRun) deletePath(p string) error {
	if err := w.f.Delete(w.ctx, p, &DeleteOptions{Recursive: true}); err != nil {
		return err
	}
	w.names = slices.DeleteFunc(w.names, func(n string) bool {
		if n == p || strings.HasPrefix(n, p+"/") {
			delete(w.refs, n)
			delete(w.sets, n) // the handle answers ErrDeleted; Close is a no-op
			return true
		}
		return false
	})
	return nil
}

// movePath moves the dataset or group at from to to, renaming the model's
// datasets; their open handles keep working.
func (w *wlRun) movePath(from, to string) error {
	if err := w.f.Move(w.ctx, from, to); err != nil {
		return err
	}
	for i, n := range w.names {
		if n == from || strings.HasPrefix(n, from+"/") {
			nn := to + n[len(from):]
			w.refs[nn], w.sets[nn] = w.refs[n], w.sets[n]
			delete(w.refs, n)
			delete(w.sets, n)
			w.names[i] = nn
		}
	}
	return nil
}

// errLeak is a workload's finding that space is neither referenced nor
// free after a delete.
var errLeak = errors.New("leaked space")

// checkNoLeak commits twice (the first commit's frees become reusable at
// the second) and compares the allocator with Check's unreferenced bytes.
func (w *wlRun) checkNoLeak() error {
	for range 2 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	r, err := Check(w.ctx, "", &Options{Driver: w.drv})
	if err != nil {
		return err
	}
	st := w.f.space.a.Stats()
	if st.FreeBytes+st.PendingBytes != r.Unreferenced || len(r.Problems) > 0 {
		return fmt.Errorf("%w: free %d + pending %d, unreferenced %d, problems %v", errLeak, st.FreeBytes, st.PendingBytes, r.Unreferenced, r.Problems)
	}
	return nil
}

// namespaceWorkload creates groups and datasets of each stored layout, fills
// them (chunked and contiguous), deletes and moves datasets and groups between commits (some with
// dirty chunks in the cache), reopens, and checks that nothing leaked.
var namespaceWorkload = defineWorkload(17, &Options{CacheConfig: cache.Config{QuiescentBytes: 6 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"a/x": {Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"a/y": {Type: Int32, Shape: []uint64{40}, Layout: Contiguous},
		"z":   {Type: Uint8, Shape: []uint64{30, 30}, Chunk: []uint64{8, 8}, Filters: []Filter{Deflate(1)}},
		"c":   {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}},
	}
	return steps(
		func() error { _, err := w.f.CreateGroup(w.ctx, "a"); return err },
		func() error { _, err := w.f.CreateGroup(w.ctx, "a/e"); return err },
		func() error { return w.create(specs, "a/x", "a/y", "z") },
		func() error { return w.writeRandom(8) },
		w.flush,
		func() error { return w.deletePath("a/y") },
		func() error { return w.writeRandom(4) },
		w.flush,
		// Clean when moved: only the move changes their headers.
		func() error { return w.movePath("a", "b") },
		w.flush,
		func() error { return w.create(specs, "c") },
		func() error { return w.writeRandom(6) },
		func() error { return w.deletePath("z") }, // with dirty chunks
		w.flush,
		func() error { return w.movePath("b/x", "x2") },
		func() error { return w.writeRandom(4) },
		w.reopen,
		func() error { return w.deletePath("b") }, // a group and its empty subgroup
		func() error { return w.writeRandom(4) },
		w.checkNoLeak,
		func() error { return w.deletePath("c") },
		w.checkNoLeak,
		func() error { return w.writeRandom(3) },
	)
})

// TestCrashAtEveryWriteDeleteMove: the crash sweep over a workload that
// creates, fills, deletes and moves datasets and groups. Every crash image
// opens at one committed state (names and data), passes Check, and the
// clean run leaks no space.
func TestCrashAtEveryWriteDeleteMove(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, namespaceWorkload, 1)
}

// TestFaultAtEveryOperationDeleteMove: an I/O error at every operation of
// the same workload reaches the caller, and the file reopens at its last
// committed state.
func TestFaultAtEveryOperationDeleteMove(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, namespaceWorkload, 2)
}
