package vfd

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Fault wraps a Driver and injects failures chosen by its Injectors: failed
// operations, short and torn writes, added latency. In the spirit of pebble's
// vfs/errorfs, but over one file and with exact per-kind operation indices, so
// a test can run a workload once to learn how many writes it issues and then
// rerun it failing write i for every i.
//
// Every operation is numbered before the injectors see it: OpInfo.Index
// counts operations of the same kind, OpInfo.Seq operations of any kind,
// both from 0, each taken from an atomic counter, so the numbering is exact
// (every index is given to exactly one operation) under any concurrency.
// Close is passed through, never counted and never failed.
//
// Injection can be switched off and on at runtime (SetEnabled), to "repair
// the disk" and let a test reopen on the same file. Safe for concurrent use.
type Fault struct {
	inner  Driver
	closed atomic.Bool
	// enabled gates the injectors; operations are numbered either way.
	enabled   atomic.Bool
	injectors atomic.Pointer[[]Injector] // copy-on-write, see Add
	counts    [NumOps]atomic.Int64
	seq       atomic.Int64
	injected  atomic.Int64
	// sleep is time.Sleep; tests substitute a recorder so that they never
	// measure wall-clock time.
	sleep func(time.Duration)
}

var _ Driver = (*Fault)(nil)

// NewFault wraps inner with the given injectors (more can be added later).
// Injection starts enabled.
func NewFault(inner Driver, injectors ...Injector) *Fault {
	f := &Fault{inner: inner, sleep: time.Sleep}
	f.enabled.Store(true)
	f.Add(injectors...)
	return f
}

// Add appends injectors. Operations already under way may or may not see
// them.
func (f *Fault) Add(injectors ...Injector) {
	for {
		old := f.injectors.Load()
		var next []Injector
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, injectors...)
		if f.injectors.CompareAndSwap(old, &next) {
			return
		}
	}
}

// SetEnabled switches injection on or off. Operation numbering continues
// while it is off.
func (f *Fault) SetEnabled(on bool) { f.enabled.Store(on) }

// Enabled reports whether injection is on.
func (f *Fault) Enabled() bool { return f.enabled.Load() }

// Inner returns the wrapped driver.
func (f *Fault) Inner() Driver { return f.inner }

// OpCounts holds one count per operation kind.
type OpCounts [NumOps]int64

// Total sums the counts of every kind.
func (c OpCounts) Total() int64 {
	var t int64
	for _, n := range c {
		t += n
	}
	return t
}

// Ops reports how many operations of each kind the Fault has numbered, so
// far, including failed ones and those seen while injection was off.
func (f *Fault) Ops() OpCounts {
	var c OpCounts
	for i := range c {
		c[i] = f.counts[i].Load()
	}
	return c
}

// Injected reports how many operations failed by injection.
func (f *Fault) Injected() int64 { return f.injected.Load() }

// OpInfo describes one operation to the injectors.
type OpInfo struct {
	Op Op
	// Index is the operation's position among operations of kind Op, and Seq
	// its position among all operations, both from 0.
	Index, Seq int64
	// Off is the offset of ReadAt/WriteAt, the lowest extent offset of a
	// vector operation, the new size of Truncate, 0 otherwise.
	Off int64
	// Len is the number of bytes the operation transfers (all extents).
	Len int64
}

// Effect is what an Injector does to one operation.
type Effect struct {
	// Delay is slept before the operation runs (or fails).
	Delay time.Duration
	// Err, when set, fails the operation: the inner driver is not called,
	// except for what Partial lets through. It should wrap ErrInjected.
	Err error
	// Partial, for a failing write, chooses what reaches the inner driver
	// before Err is returned. It receives the write's extents in offset
	// order and returns pieces of them (sub-slices, still disjoint). Nil
	// writes nothing. Ignored for other operations.
	//
	// Partial without Err is a lying driver (ShortCount): WriteAt writes
	// only what Partial lets through and reports that count with a nil
	// error. WriteV, which returns no count, ignores it.
	Partial func(sorted []Extent) []Extent
}

// An Injector decides the Effect on each operation. Inject is called from
// many goroutines at once.
//
// With several injectors, delays add up and the first one returning an Err
// decides the failure.
type Injector interface {
	Inject(info OpInfo) Effect
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(OpInfo) Effect

func (fn InjectorFunc) Inject(info OpInfo) Effect { return fn(info) }

// A Trigger selects the operations an injector acts on. Hit is called from
// many goroutines at once.
type Trigger interface {
	Hit(info OpInfo) bool
}

// TriggerFunc adapts a function to Trigger.
type TriggerFunc func(OpInfo) bool

func (fn TriggerFunc) Hit(info OpInfo) bool { return fn(info) }

// position is the index a per-kind trigger counts with: Seq for OpAny.
func position(kind Op, info OpInfo) int64 {
	if kind == OpAny {
		return info.Seq
	}
	return info.Index
}

// Nth hits exactly one operation: the n-th (from 0) of kind, or of all
// operations for OpAny.
func Nth(kind Op, n int64) Trigger {
	return TriggerFunc(func(info OpInfo) bool {
		return kind.matches(info.Op) && position(kind, info) == n
	})
}

// From hits the n-th operation of kind (from 0) and every later one: a disk
// that stays broken.
func From(kind Op, n int64) Trigger {
	return TriggerFunc(func(info OpInfo) bool {
		return kind.matches(info.Op) && position(kind, info) >= n
	})
}

// Every hits every operation of kind.
func Every(kind Op) Trigger {
	return TriggerFunc(func(info OpInfo) bool { return kind.matches(info.Op) })
}

// Randomly hits each operation of kind with probability p. The decision is a
// hash of seed and the operation's index, so the same seed hits the same
// indices in every run, however goroutines interleave.
func Randomly(kind Op, p float64, seed uint64) Trigger {
	return TriggerFunc(func(info OpInfo) bool {
		if !kind.matches(info.Op) {
			return false
		}
		u := float64(mix64(seed^uint64(kind)<<56, uint64(position(kind, info)))>>11) / (1 << 53)
		return u < p
	})
}

// mix64 is splitmix64's finalizer over seed and x: a seeded, stateless RNG
// indexed by x.
func mix64(seed, x uint64) uint64 {
	z := seed + (x+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// injectedErr is the error of an injected failure.
func injectedErr(what string, info OpInfo) error {
	return fmt.Errorf("%w: %s on %s #%d (op %d)", ErrInjected, what, info.Op, info.Index, info.Seq)
}

// Fail fails the operations t hits, writing nothing.
func Fail(t Trigger) Injector {
	return InjectorFunc(func(info OpInfo) Effect {
		if !t.Hit(info) {
			return Effect{}
		}
		return Effect{Err: injectedErr("failure", info)}
	})
}

// ShortWrite makes the writes t hits write a prefix of random length (in
// offset order, fewer bytes than asked, possibly none) and then fail.
// Operations other than writes are left alone. The length is a function of
// seed and the operation's Seq.
func ShortWrite(t Trigger, seed uint64) Injector {
	return InjectorFunc(func(info OpInfo) Effect {
		if !info.Op.IsWrite() || info.Len == 0 || !t.Hit(info) {
			return Effect{}
		}
		keep := int64(mix64(seed, uint64(info.Seq)) % uint64(info.Len))
		return Effect{
			Err:     injectedErr("short write", info),
			Partial: func(sorted []Extent) []Extent { return prefixOf(sorted, keep) },
		}
	})
}

// ShortCount makes the WriteAt calls t hits write a prefix of random length
// (fewer bytes than asked, possibly none) and report that length with a nil
// error: the broken driver that io.Writer's contract exists to catch.
// Callers must take it as io.ErrShortWrite (WriteFull does). Other
// operations, WriteV included (it returns no count), are left alone. The
// length is a function of seed and the operation's Seq.
func ShortCount(t Trigger, seed uint64) Injector {
	return InjectorFunc(func(info OpInfo) Effect {
		if info.Op != OpWrite || info.Len == 0 || !t.Hit(info) {
			return Effect{}
		}
		keep := int64(mix64(seed, uint64(info.Seq)) % uint64(info.Len))
		return Effect{Partial: func(sorted []Extent) []Extent { return prefixOf(sorted, keep) }}
	})
}

// TornWrite makes the writes t hits write a random subset of their
// SectorSize-aligned sectors and then fail. Operations other than writes are
// left alone. The subset is a function of seed and the operation's Seq.
func TornWrite(t Trigger, seed uint64) Injector {
	return InjectorFunc(func(info OpInfo) Effect {
		if !info.Op.IsWrite() || info.Len == 0 || !t.Hit(info) {
			return Effect{}
		}
		return Effect{
			Err: injectedErr("torn write", info),
			Partial: func(sorted []Extent) []Extent {
				return sectorSubset(sorted, rand.New(rand.NewPCG(seed, uint64(info.Seq))))
			},
		}
	})
}

// Latency delays the operations t hits by d.
func Latency(t Trigger, d time.Duration) Injector {
	return InjectorFunc(func(info OpInfo) Effect {
		if !t.Hit(info) {
			return Effect{}
		}
		return Effect{Delay: d}
	})
}

// prefixOf returns the first n bytes of sorted extents.
func prefixOf(sorted []Extent, n int64) []Extent {
	var out []Extent
	for _, e := range sorted {
		if n <= 0 {
			break
		}
		k := min(n, int64(len(e.Buf)))
		out = append(out, Extent{Off: e.Off, Buf: e.Buf[:k]})
		n -= k
	}
	return out
}

// sectorSubset keeps each sector-aligned piece of the extents with
// probability one half.
func sectorSubset(sorted []Extent, rng *rand.Rand) []Extent {
	var out []Extent
	for _, e := range sorted {
		for pos := e.Off; pos < e.End(); {
			next := min((pos/SectorSize+1)*SectorSize, e.End())
			if rng.IntN(2) == 1 {
				out = append(out, Extent{Off: pos, Buf: e.Buf[pos-e.Off : next-e.Off]})
			}
			pos = next
		}
	}
	return out
}

// begin numbers an operation and gathers the injectors' effect on it, having
// slept any delay.
func (f *Fault) begin(op Op, off, n int64) Effect {
	info := OpInfo{Op: op, Off: off, Len: n}
	info.Index = f.counts[op].Add(1) - 1
	info.Seq = f.seq.Add(1) - 1
	var eff Effect
	if !f.enabled.Load() {
		return eff
	}
	if injs := f.injectors.Load(); injs != nil {
		for _, inj := range *injs {
			e := inj.Inject(info)
			eff.Delay += e.Delay
			if eff.Err == nil && e.Err != nil {
				eff.Err, eff.Partial = e.Err, e.Partial
			} else if eff.Err == nil && eff.Partial == nil && e.Partial != nil {
				eff.Partial = e.Partial // a lie; a later failure overrides it
			}
		}
	}
	if eff.Delay > 0 {
		f.sleep(eff.Delay)
	}
	if eff.Err != nil || eff.Partial != nil {
		f.injected.Add(1)
	}
	return eff
}

// partialWrite lets a failing write's Partial pieces through to the inner
// driver and returns how many leading bytes (from the write's lowest
// offset, contiguous) were written, with the error to report.
func (f *Fault) partialWrite(op Op, sorted []Extent, eff Effect) (int, error) {
	if eff.Partial == nil || len(sorted) == 0 {
		return 0, eff.Err
	}
	pieces := eff.Partial(sorted)
	if len(pieces) == 0 {
		return 0, eff.Err
	}
	var err error
	if op == OpWrite {
		for _, p := range pieces {
			if _, err = f.inner.WriteAt(p.Buf, p.Off); err != nil {
				break
			}
		}
	} else {
		err = f.inner.WriteV(pieces)
	}
	if err != nil {
		return 0, errors.Join(eff.Err, err)
	}
	n, at := 0, sorted[0].Off
	for _, p := range pieces {
		if p.Off != at {
			break
		}
		n += len(p.Buf)
		at = p.End()
	}
	return n, eff.Err
}

func (f *Fault) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if eff := f.begin(OpRead, off, int64(len(p))); eff.Err != nil {
		return 0, eff.Err
	}
	return f.inner.ReadAt(p, off)
}

func (f *Fault) WriteAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if eff := f.begin(OpWrite, off, int64(len(p))); eff.Err != nil || eff.Partial != nil {
		if checkOff(off, len(p)) != nil || len(p) == 0 {
			if eff.Err == nil {
				return f.inner.WriteAt(p, off) // nothing to lie about
			}
			return 0, eff.Err
		}
		return f.partialWrite(OpWrite, []Extent{{Off: off, Buf: p}}, eff)
	}
	// Only an injected ShortCount may lie: an inner driver's short count is
	// reported as the error it is.
	n, err := f.inner.WriteAt(p, off)
	return n, shortWriteErr(n, p, off, err)
}

func (f *Fault) ReadV(exts []Extent) error {
	if f.closed.Load() {
		return ErrClosed
	}
	if eff := f.begin(OpReadV, lowest(exts), extentBytes(exts)); eff.Err != nil {
		return eff.Err
	}
	return f.inner.ReadV(exts)
}

func (f *Fault) WriteV(exts []Extent) error {
	if f.closed.Load() {
		return ErrClosed
	}
	if eff := f.begin(OpWriteV, lowest(exts), extentBytes(exts)); eff.Err != nil {
		sorted, _, err := sortExtents(exts, true)
		if err != nil {
			return err
		}
		_, err = f.partialWrite(OpWriteV, sorted, eff)
		return err
	}
	return f.inner.WriteV(exts)
}

func (f *Fault) Sync() error {
	if f.closed.Load() {
		return ErrClosed
	}
	if eff := f.begin(OpSync, 0, 0); eff.Err != nil {
		return eff.Err
	}
	return f.inner.Sync()
}

func (f *Fault) Size() (int64, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if eff := f.begin(OpSize, 0, 0); eff.Err != nil {
		return 0, eff.Err
	}
	return f.inner.Size()
}

func (f *Fault) Truncate(size int64) error {
	if f.closed.Load() {
		return ErrClosed
	}
	if eff := f.begin(OpTruncate, size, 0); eff.Err != nil {
		return eff.Err
	}
	return f.inner.Truncate(size)
}

// Close closes the inner driver; it is idempotent as long as the inner
// driver's Close is.
func (f *Fault) Close() error {
	f.closed.Store(true)
	return f.inner.Close()
}

func lowest(exts []Extent) int64 {
	if len(exts) == 0 {
		return 0
	}
	lo := exts[0].Off
	for _, e := range exts[1:] {
		lo = min(lo, e.Off)
	}
	return lo
}

func extentBytes(exts []Extent) int64 {
	var n int64
	for _, e := range exts {
		n += int64(len(e.Buf))
	}
	return n
}
