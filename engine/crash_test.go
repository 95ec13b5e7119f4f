package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// snapshots records, for every commit the workload attempted, the model of
// every dataset as that commit captures it, keyed by the generation the
// commit would write.
type snapshots map[uint64]map[string]*refArray

func (s snapshots) record(gen uint64, refs map[string]*refArray) {
	m := make(map[string]*refArray, len(refs))
	for k, v := range refs {
		m[k] = v.clone()
	}
	s[gen] = m
}

// commit records refs as the state f's next commit captures, commits, and
// on success moves *lastAck to the acknowledged generation: a workload's
// Flush.
func (s snapshots) commit(ctx context.Context, f *File, refs map[string]*refArray, lastAck *uint64) error {
	s.record(f.Generation()+1, refs)
	if err := f.Flush(ctx); err != nil {
		return err
	}
	*lastAck = f.Generation()
	return nil
}

// crashWorkload creates a file and runs a fixed sequence of creates,
// writes, extent changes, flushes and a close on an extensible-array and
// a fixed-array dataset, stopping at the first error.
var crashWorkload = defineWorkload(99, &Options{CacheConfig: cache.Config{QuiescentBytes: 6 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"ea": {Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"fa": {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}},
	}
	return steps(
		func() error { return w.create(specs, "ea", "fa") },
		func() error { return w.writeRandom(6) },
		w.flush,
		func() error { return w.writeRandom(6) },
		func() error { return w.setExtent("ea", []uint64{3, 10}) },
		w.flush,
		func() error { return w.setExtent("ea", []uint64{9, 10}) },
		func() error { return w.writeRandom(6) },
	)
})

// verifyCommitted opens drv and checks it holds exactly one of the states a
// commit at or after lastAck captured, and passes the consistency checker.
func verifyCommitted(t *testing.T, drv vfd.Driver, lastAck uint64, snaps snapshots) uint64 {
	t.Helper()
	ctx := context.Background()
	_, err := Check(ctx, "", &Options{Driver: drv})
	require.NoError(t, err, "check")
	f, err := Open(ctx, "", &Options{Driver: drv, ReadOnly: true})
	require.NoError(t, err, "open")
	defer f.Close(ctx)
	gen := f.Generation()
	require.GreaterOrEqual(t, gen, lastAck, "reopened at a generation older than the last acknowledged")
	want, ok := snaps[gen]
	require.True(t, ok, "reopened at generation %d, which no commit wrote", gen)
	require.Len(t, f.datasetNames(), len(want), "generation %d: datasets", gen)
	for n, ref := range want {
		ds, err := f.OpenDataset(ctx, n, nil)
		require.NoError(t, err, "generation %d: open %s", gen, n)
		ref.verify(t, ds)
		verifyDefined(t, ds, ref)
	}
	return gen
}

// cutDriver simulates a power cut: the first `left` mutating operations
// (writes, syncs, truncates) pass; from then on every operation fails.
type cutDriver struct {
	vfd.Driver
	left atomic.Int64
	used atomic.Int64
}

var errPowerCut = errors.New("power cut")

func (c *cutDriver) mutate() error {
	c.used.Add(1)
	if c.left.Add(-1) < 0 {
		return errPowerCut
	}
	return nil
}

func (c *cutDriver) cut() bool { return c.left.Load() < 0 }

func (c *cutDriver) WriteAt(p []byte, off int64) (int, error) {
	if err := c.mutate(); err != nil {
		return 0, err
	}
	return c.Driver.WriteAt(p, off)
}
func (c *cutDriver) WriteV(e []vfd.Extent) error {
	if err := c.mutate(); err != nil {
		return err
	}
	return c.Driver.WriteV(e)
}
func (c *cutDriver) Sync() error {
	if err := c.mutate(); err != nil {
		return err
	}
	return c.Driver.Sync()
}
func (c *cutDriver) Truncate(n int64) error {
	if err := c.mutate(); err != nil {
		return err
	}
	return c.Driver.Truncate(n)
}
func (c *cutDriver) ReadAt(p []byte, off int64) (int, error) {
	if c.cut() {
		return 0, errPowerCut
	}
	return c.Driver.ReadAt(p, off)
}
func (c *cutDriver) ReadV(e []vfd.Extent) error {
	if c.cut() {
		return errPowerCut
	}
	return c.Driver.ReadV(e)
}

// TestCrashAtEveryWrite cuts the power at every mutating operation of the
// workload (including every one inside Flush and Close), then opens the image
// the crash leaves — keeping only synced bytes, or a random part of the
// unsynced ones — and requires: Open succeeds, the checker passes, and the
// state is the last acknowledged commit or a later attempted one, byte for
// byte.
func TestCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, crashWorkload, 1)
}

// workload runs a scripted sequence of calls on drv with seed, recording
// in snaps the state each commit captures; it returns the last generation
// a Flush (or Close) acknowledged.
type workload func(drv vfd.Driver, seed uint64, snaps snapshots) (lastAck uint64, err error)

// crashSweep cuts the power at each mutating operation of w and verifies
// both crash images (synced bytes only, and a random part of the unsynced
// ones) hold a committed state. It returns the number of crash points.
func crashSweep(t *testing.T, w workload, seed uint64) int {
	t.Helper()
	// Count the workload's mutating operations on a clean run.
	probe := &cutDriver{Driver: vfd.NewCrash()}
	probe.left.Store(1 << 40)
	_, err := w(probe, seed, snapshots{})
	require.NoError(t, err, "the workload without a cut")
	total := int(probe.used.Load())
	tried := 0
	for k := 0; k <= total; k++ {
		crash := vfd.NewCrash()
		drv := &cutDriver{Driver: crash}
		drv.left.Store(int64(k))
		snaps := snapshots{}
		lastAck, _ := w(drv, seed, snaps)
		if lastAck == 0 {
			continue // Create never succeeded: nothing was promised
		}
		for _, mode := range []vfd.CrashMode{vfd.KeepSynced, vfd.RandomUnsynced} {
			img := vfd.NewMemFrom(crash.CrashImage(mode, uint64(k)))
			tried++
			verifyCommitted(t, img, lastAck, snaps)
			if t.Failed() {
				t.Fatalf("crash point %d/%d (%s image) failed", k, total, mode)
			}
		}
	}
	t.Logf("tried %d crash images over %d crash points", tried, total+1)
	return total
}

// TestFaultAtEveryOperation injects an I/O error at every operation index of
// the workload (reads included). Every injected error must reach the caller,
// nothing may panic or leak, and once the fault is gone the file reopens in
// its last committed state.
func TestFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, crashWorkload, 2)
}

// faultSweep fails every operation of w from index k on, for each k: an
// injected error must reach the caller, and once the fault is gone the
// file reopens in its last committed state.
func faultSweep(t *testing.T, w workload, seed uint64) {
	t.Helper()
	probe := vfd.NewFault(vfd.NewMem())
	_, err := w(probe, seed, snapshots{})
	require.NoError(t, err, "the workload without a fault")
	total := probe.Ops().Total()
	for k := int64(0); k < total; k++ {
		mem := vfd.NewMem()
		fd := vfd.NewFault(mem, vfd.Fail(vfd.From(vfd.OpAny, k))) // op k and every later op fail
		snaps := snapshots{}
		lastAck, err := w(fd, seed, snaps)
		if fd.Injected() > 0 && err == nil {
			t.Fatalf("fault at op %d/%d: %d errors injected, none reached the caller", k, total, fd.Injected())
		}
		if lastAck == 0 {
			continue
		}
		fd.SetEnabled(false)
		verifyCommitted(t, mem, lastAck, snaps)
		if t.Failed() {
			t.Fatalf("fault at op %d/%d", k, total)
		}
	}
	t.Logf("injected a fault at each of %d operation indexes", total)
}
