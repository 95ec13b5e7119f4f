package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// The single-fault sweep for contiguous datasets: one I/O operation of a
// workload fails (ENOSPC with half the bytes written, or EIO, on a write;
// EIO on a read or sync) and every other one succeeds, so the workload
// goes on after the failure, as an application would: it writes, rewrites
// the same pieces between commits (whole pieces directly, parts through
// the cache), flushes and closes. After each fault:
//
//   - a Write that failed was applied to each piece wholly or not at all
//     (a Write inside one piece not at all), and the model follows what
//     it finds;
//   - the injected error reached some caller;
//   - the file on the repaired disk checks clean and holds a state some
//     commit of the model captured at or after the last acknowledged
//     one, and exactly the final model if Close returned nil.

type faultMode int

const (
	faultENOSPC   faultMode = iota // writes: ENOSPC after half the bytes
	faultEIOWrite                  // writes and syncs: EIO, nothing written
	faultEIORead                   // reads: EIO
)

func (m faultMode) String() string {
	return [...]string{"ENOSPC on write", "EIO on write", "EIO on read"}[m]
}

func (m faultMode) hits(op vfd.Op) bool {
	switch m {
	case faultENOSPC:
		return op.IsWrite()
	case faultEIOWrite:
		return op.IsWrite() || op == vfd.OpSync
	}
	return op == vfd.OpRead || op == vfd.OpReadV
}

// faultOnceAt fails operation seq (counted over every kind) if mode hits
// its kind.
func faultOnceAt(mode faultMode, seq int64) vfd.Injector {
	return vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if info.Seq != seq || !mode.hits(info.Op) {
			return vfd.Effect{}
		}
		if mode == faultENOSPC {
			return vfd.Effect{
				Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.ENOSPC),
				Partial: func(sorted []vfd.Extent) []vfd.Extent {
					var n int64
					for _, x := range sorted {
						n += int64(len(x.Buf))
					}
					return prefixExtents(sorted, n/2)
				},
			}
		}
		return vfd.Effect{Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.EIO)}
	})
}

func prefixExtents(sorted []vfd.Extent, n int64) []vfd.Extent {
	var out []vfd.Extent
	for _, x := range sorted {
		if n <= 0 {
			break
		}
		k := min(n, int64(len(x.Buf)))
		out = append(out, vfd.Extent{Off: x.Off, Buf: x.Buf[:k]})
		n -= k
	}
	return out
}

// multiSnaps is every state a commit of each generation may have
// captured: a Flush that failed may or may not have written its
// superblock, and the next commit then writes the same generation again.
type multiSnaps map[uint64][]map[string]*refArray

func (s multiSnaps) record(gen uint64, refs map[string]*refArray) {
	m := make(map[string]*refArray, len(refs))
	for k, v := range refs {
		m[k] = v.clone()
	}
	s[gen] = append(s[gen], m)
}

// contigFaultRun is the workload's outcome.
type contigFaultRun struct {
	lastAck  uint64 // last generation a Flush or Close acknowledged
	closeOK  bool
	final    map[string]*refArray // the model when Close ran
	errs     int                  // calls that returned an error
	failedWr int                  // Writes among them
}

// contigFaultWorkload runs the workload on drv; t fails when a failed
// Write was not atomic per piece.
func contigFaultWorkload(t *testing.T, drv vfd.Driver, seed uint64, snaps multiSnaps) (run contigFaultRun) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 27))
	refs := map[string]*refArray{}
	snaps.record(1, refs)
	// No background write-back (the active limit is the quiescent one,
	// nothing is pre-encoded): every operation is a caller's, numbered
	// alike in every run.
	f, err := CreateWith(drv, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 10, ActiveMultiplier: 1, PreEncodeBytes: -1}})
	if err != nil {
		run.errs++
		return run
	}
	run.lastAck = 1
	defer func() {
		snaps.record(f.Generation()+1, refs) // what Close commits
		run.final = refs
		if err := f.Close(); err != nil {
			run.errs++
		} else {
			run.closeOK = true
			run.lastAck = f.Generation()
		}
	}()
	specs := []struct {
		name string
		spec DatasetSpec
	}{
		{"c1", DatasetSpec{Type: Uint16, Shape: []uint64{6, 10}, Fill: []byte{1, 2}}},                   // one small cached piece
		{"c2", DatasetSpec{Type: Uint8, Shape: []uint64{100, 700}, Layout: Contiguous}},                 // a large and a short piece
		{"c3", DatasetSpec{Type: Uint8, Shape: []uint64{16, contigPieceBytes / 8}, Layout: Contiguous}}, // two 64 KiB pieces
	}
	sets := map[string]*Dataset{}
	for _, s := range specs {
		ds, err := f.CreateDataset(s.name, s.spec)
		if err != nil {
			run.errs++
			return run
		}
		sets[s.name] = ds
		refs[s.name] = newRef(s.spec.Shape, s.spec.Type.Size(), s.spec.Fill)
	}
	write := func(name string, sel Selection, buf []byte) {
		ds, ref := sets[name], refs[name]
		err := ds.Write(ctx, sel, buf)
		if err == nil {
			ref.write(sel, buf)
			return
		}
		run.errs++
		run.failedWr++
		after := ref.clone()
		after.write(sel, buf)
		got := make([]byte, len(ref.data))
		if err := ds.Read(ctx, All(ref.dims), got); err != nil {
			t.Fatalf("%s: read after a failed write: %v", name, err)
		}
		pieceBytes := int(ds.Chunk()[0]) * len(ref.data) / int(ref.dims[0])
		applied := 0
		for lo := 0; lo < len(got); lo += pieceBytes {
			hi := min(lo+pieceBytes, len(got))
			switch {
			case bytes.Equal(got[lo:hi], ref.data[lo:hi]):
			case bytes.Equal(got[lo:hi], after.data[lo:hi]):
				applied++
			default:
				t.Fatalf("%s: a failed write (%v) left piece %d neither as it was nor as written", name, err, lo/pieceBytes)
			}
		}
		if applied > 0 && !bytes.Equal(ref.data, after.data) {
			pieces := map[int]bool{}
			points(sel, func(c []uint64, _ uint64) { pieces[int(c[0]/ds.Chunk()[0])] = true })
			if len(pieces) == 1 {
				t.Fatalf("%s: a failed write inside one piece (%v) was applied", name, err)
			}
		}
		ref.data = got
	}
	wholePiece := func(p uint64) {
		rows := sets["c3"].Chunk()[0]
		sel := Box([]uint64{p * rows, 0}, []uint64{rows, refs["c3"].dims[1]})
		write("c3", sel, randomBytes(rng, int(sel.NumElements())))
	}
	random := func(name string) {
		r := refs[name]
		sel := randomSelection(rng, r.dims)
		write(name, sel, randomBytes(rng, int(sel.NumElements())*r.elemSize))
	}
	flush := func() {
		snaps.record(f.Generation()+1, refs)
		if err := f.Flush(ctx); err != nil {
			run.errs++
			return
		}
		run.lastAck = f.Generation()
	}
	for round := 0; round < 2; round++ {
		wholePiece(0)
		random("c1")
		wholePiece(0) // the same piece again before the commit
		wholePiece(1)
		random("c2")
		random("c3")
		random("c2")
		wholePiece(0)
		flush()
	}
	wholePiece(1)
	random("c1")
	wholePiece(1)
	random("c3")
	return run
}

// verifyContigFault opens the repaired file and checks the run's outcome.
func verifyContigFault(t *testing.T, drv vfd.Driver, run contigFaultRun, snaps multiSnaps) {
	t.Helper()
	ctx := context.Background()
	if rep, err := Check(ctx, drv); err != nil {
		t.Fatalf("check: %v %q", err, rep.Problems)
	}
	f, err := OpenWith(drv, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer f.Close()
	gen := f.Generation()
	if gen < run.lastAck {
		t.Fatalf("reopened at generation %d, but %d was acknowledged", gen, run.lastAck)
	}
	holds := func(want map[string]*refArray) bool {
		if len(f.Datasets()) != len(want) {
			return false
		}
		for n, ref := range want {
			ds, err := f.OpenDataset(n)
			if err != nil {
				t.Fatalf("open dataset %s: %v", n, err)
			}
			got := make([]byte, len(ref.data))
			if err := ds.Read(ctx, All(ref.dims), got); err != nil {
				t.Fatalf("read %s: %v", n, err)
			}
			if !bytes.Equal(got, ref.data) {
				return false
			}
		}
		return true
	}
	if run.closeOK {
		if gen != run.lastAck || !holds(run.final) {
			t.Fatalf("Close returned nil, but generation %d (acknowledged %d) does not hold the final model", gen, run.lastAck)
		}
		return
	}
	for _, want := range snaps[gen] {
		if holds(want) {
			return
		}
	}
	t.Fatalf("generation %d holds no state a commit of it captured (%d candidates)", gen, len(snaps[gen]))
}

// TestContiguousSingleFaultSweep fails each operation of the workload
// alone, in each mode the operation's kind allows.
func TestContiguousSingleFaultSweep(t *testing.T) {
	defer verifyNoLeaks(t)
	seeds := []uint64{3}
	if long() {
		seeds = append(seeds, 4, 5, 6, 7)
	}
	for _, seed := range seeds {
		contigSingleFaultSweep(t, seed)
	}
}

func contigSingleFaultSweep(t *testing.T, seed uint64) {
	t.Helper()
	// The probe run: which operation kind has each index.
	var mu sync.Mutex
	var kinds []vfd.Op
	probe := vfd.NewFault(vfd.NewMem(), vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		mu.Lock()
		for int64(len(kinds)) <= info.Seq {
			kinds = append(kinds, vfd.NumOps)
		}
		kinds[info.Seq] = info.Op
		mu.Unlock()
		return vfd.Effect{}
	}))
	if run := contigFaultWorkload(t, probe, seed, multiSnaps{}); run.errs != 0 || !run.closeOK {
		t.Fatalf("the workload fails without faults: %+v", run)
	}
	if st := probe.Ops(); st[vfd.OpWriteV] == 0 {
		t.Fatal("no vector writes")
	}
	total := map[faultMode]int{}
	failedWrites := 0
	for _, mode := range []faultMode{faultENOSPC, faultEIOWrite, faultEIORead} {
		for k, op := range kinds {
			if !mode.hits(op) {
				continue
			}
			if raceEnabled && !long() && (k+int(mode))%4 != 0 {
				continue // a quarter of the indexes: this sweep is about faults, not races
			}
			mem := vfd.NewMem()
			fd := vfd.NewFault(mem, faultOnceAt(mode, int64(k)))
			snaps := multiSnaps{}
			run := contigFaultWorkload(t, fd, seed, snaps)
			if fd.Injected() == 0 {
				continue // this run numbered its operations differently
			}
			total[mode]++
			failedWrites += run.failedWr
			if run.errs == 0 {
				t.Fatalf("%s at op %d (%s): the error reached no caller", mode, k, op)
			}
			if run.lastAck == 0 {
				continue // nothing was created
			}
			verifyContigFault(t, mem, run, snaps)
			if t.Failed() {
				t.Fatalf("%s at op %d (%s)", mode, k, op)
			}
		}
	}
	t.Logf("seed %d: faults injected: %v over %d operations; %d writes failed", seed, total, len(kinds), failedWrites)
}
