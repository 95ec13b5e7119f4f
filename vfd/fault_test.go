package vfd

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFaultNthExactUnderConcurrency: of 1600 concurrent writes exactly one,
// the 137th numbered, fails, and its bytes never reach the inner driver.
func TestFaultNthExactUnderConcurrency(t *testing.T) {
	const workers, per, block = 32, 50, 64
	mem := NewMem()
	f := NewFault(mem, Fail(Nth(OpWrite, 137)))
	var failures atomic.Int64
	var failedOff atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				off := int64(w*per+i) * block
				_, err := f.WriteAt(bytes.Repeat([]byte{1}, block), off)
				if err != nil {
					if !errors.Is(err, ErrInjected) {
						t.Errorf("unexpected error %v", err)
					}
					failures.Add(1)
					failedOff.Store(off)
				}
				// Reads interleave to prove they do not disturb write numbering.
				f.ReadAt(make([]byte, 1), 0)
			}
		}()
	}
	wg.Wait()
	if n := failures.Load(); n != 1 {
		t.Fatalf("%d writes failed, want exactly 1", n)
	}
	if got := f.Ops(); got[OpWrite] != workers*per || got[OpRead] != workers*per {
		t.Fatalf("Ops = %v", got)
	}
	if f.Injected() != 1 {
		t.Fatalf("Injected = %d", f.Injected())
	}
	img := mem.Bytes()
	off := failedOff.Load()
	for i := int64(0); i < int64(len(img)); i += block {
		want := byte(1)
		if i == off {
			want = 0
		}
		if img[i] != want {
			t.Fatalf("block at %d = %d, want %d", i, img[i], want)
		}
	}
}

// workload is a small sequence of every kind of operation.
func workload(d Driver) error {
	if err := d.WriteV([]Extent{{Off: 0, Buf: pattern(1000, 1)}, {Off: 1000, Buf: pattern(24, 2)}, {Off: 4096, Buf: pattern(512, 3)}}); err != nil {
		return err
	}
	if _, err := d.WriteAt(pattern(100, 4), 200); err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		return err
	}
	if _, err := d.Size(); err != nil {
		return err
	}
	if err := d.Truncate(8192); err != nil {
		return err
	}
	if _, err := d.ReadAt(make([]byte, 10), 0); err != nil {
		return err
	}
	return d.ReadV([]Extent{{Off: 0, Buf: make([]byte, 10)}, {Off: 4096, Buf: make([]byte, 10)}})
}

// TestFaultEveryIndex runs the workload once to count its operations, then
// once per operation index failing exactly that one; one index past the end
// fails nothing.
func TestFaultEveryIndex(t *testing.T) {
	probe := NewFault(NewMem())
	if err := workload(probe); err != nil {
		t.Fatal(err)
	}
	ops := probe.Ops()
	if ops.Total() != 7 || ops[OpWriteV] != 1 || ops[OpReadV] != 1 {
		t.Fatalf("probe Ops = %v", ops)
	}
	for i := range ops.Total() + 1 {
		f := NewFault(NewMem(), Fail(Nth(OpAny, i)))
		err := workload(f)
		if i < ops.Total() {
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("failing op %d: workload returned %v", i, err)
			}
			if f.Ops().Total() != i+1 {
				t.Fatalf("failing op %d: %d ops ran", i, f.Ops().Total())
			}
		} else if err != nil {
			t.Fatalf("index %d past the workload: %v", i, err)
		}
	}
	// Per kind: the second write of kind OpWrite does not exist; the first does.
	if err := workload(NewFault(NewMem(), Fail(Nth(OpWrite, 0)))); !errors.Is(err, ErrInjected) {
		t.Fatalf("Nth(OpWrite, 0): %v", err)
	}
	if err := workload(NewFault(NewMem(), Fail(Nth(OpWrite, 1)))); err != nil {
		t.Fatalf("Nth(OpWrite, 1): %v", err)
	}
}

func TestFaultFrom(t *testing.T) {
	f := NewFault(NewMem(), Fail(From(OpSync, 3)))
	var failed []int
	for i := range 10 {
		if err := f.Sync(); err != nil {
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("failed syncs %v", failed)
	}
}

func TestFaultRandomlyDeterministic(t *testing.T) {
	run := func(p float64, seed uint64) []int {
		f := NewFault(NewMem(), Fail(Randomly(OpSize, p, seed)))
		var hit []int
		for i := range 2000 {
			f.Sync() // other kinds do not shift the per-kind index
			if _, err := f.Size(); err != nil {
				hit = append(hit, i)
			}
		}
		return hit
	}
	a, b := run(0.25, 42), run(0.25, 42)
	if !slices.Equal(a, b) {
		t.Fatal("same seed hit different operations")
	}
	if len(a) < 400 || len(a) > 600 {
		t.Fatalf("p=0.25 hit %d of 2000", len(a))
	}
	if slices.Equal(a, run(0.25, 43)) {
		t.Fatal("different seeds hit the same operations")
	}
	if n := len(run(0, 1)); n != 0 {
		t.Fatalf("p=0 hit %d", n)
	}
	if n := len(run(1, 1)); n != 2000 {
		t.Fatalf("p=1 hit %d", n)
	}
}

func TestFaultShortWrite(t *testing.T) {
	for seed := range uint64(20) {
		mem := NewMem()
		mustWrite(t, mem, make([]byte, 8000), 0)
		f := NewFault(mem, ShortWrite(Every(OpWrite), seed))
		data := bytes.Repeat([]byte{7}, 5000)
		n, err := f.WriteAt(data, 1000)
		if !errors.Is(err, ErrInjected) || n >= len(data) {
			t.Fatalf("seed %d: short write = %d, %v", seed, n, err)
		}
		img := mem.Bytes()
		if !bytes.Equal(img[1000:1000+n], data[:n]) || !bytes.Equal(img[1000+n:6000], make([]byte, 5000-n)) {
			t.Fatalf("seed %d: short write of %d bytes left wrong contents", seed, n)
		}
	}
	// WriteV: the prefix is in offset order, whatever the caller's order.
	mem := NewMem()
	f := NewFault(mem, ShortWrite(Every(OpWriteV), 3))
	exts := []Extent{{Off: 3000, Buf: bytes.Repeat([]byte{3}, 1000)}, {Off: 0, Buf: bytes.Repeat([]byte{1}, 1000)}, {Off: 1000, Buf: bytes.Repeat([]byte{2}, 1000)}}
	if err := f.WriteV(exts); !errors.Is(err, ErrInjected) {
		t.Fatalf("short WriteV: %v", err)
	}
	img := mem.Bytes()
	want := append(append(bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 1000)...), make([]byte, 1000)...)
	want = append(want, bytes.Repeat([]byte{3}, 1000)...)
	if len(img) >= len(want) || !bytes.Equal(img, want[:len(img)]) {
		t.Fatalf("short WriteV wrote %d bytes, not a prefix in offset order", len(img))
	}
	// Operations other than writes are left alone.
	g := NewFault(NewMemFrom([]byte{1}), ShortWrite(Every(OpAny), 1))
	if _, err := g.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("ShortWrite affected a read: %v", err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("ShortWrite affected a sync: %v", err)
	}
}

func TestFaultTornWrite(t *testing.T) {
	var sawMixed bool
	for seed := range uint64(20) {
		mem := NewMem()
		f := NewFault(mem, TornWrite(Every(OpAny), seed))
		off := int64(300) // unaligned: first and last pieces are partial sectors
		data := bytes.Repeat([]byte{9}, 8*SectorSize)
		if _, err := f.WriteAt(data, off); !errors.Is(err, ErrInjected) {
			t.Fatalf("torn write: %v", err)
		}
		img := mem.Bytes()
		img = append(img, make([]byte, max(0, int(off)+len(data)-len(img)))...)
		kept, lost := 0, 0
		for pos := off; pos < off+int64(len(data)); {
			next := min((pos/SectorSize+1)*SectorSize, off+int64(len(data)))
			piece := img[pos:next]
			switch {
			case bytes.Equal(piece, data[:len(piece)]):
				kept++
			case bytes.Equal(piece, make([]byte, len(piece))):
				lost++
			default:
				t.Fatalf("seed %d: sector piece at %d is neither old nor new", seed, pos)
			}
			pos = next
		}
		sawMixed = sawMixed || (kept > 0 && lost > 0)
		if _, err := f.Size(); err != nil {
			t.Fatalf("TornWrite affected Size: %v", err)
		}
	}
	if !sawMixed {
		t.Fatal("no seed tore a write into kept and lost sectors")
	}
}

func TestFaultLatency(t *testing.T) {
	var mu sync.Mutex
	var slept []time.Duration
	f := NewFault(NewMem(), Latency(Every(OpSync), 5*time.Millisecond), Latency(Every(OpAny), time.Millisecond))
	f.sleep = func(d time.Duration) {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
	}
	f.Sync()
	f.Size()
	if !slices.Equal(slept, []time.Duration{6 * time.Millisecond, time.Millisecond}) {
		t.Fatalf("slept %v", slept)
	}
}

func TestFaultSetEnabled(t *testing.T) {
	f := NewFault(NewMem(), Fail(Every(OpSync)))
	if f.Sync() == nil {
		t.Fatal("enabled fault did not fail")
	}
	f.SetEnabled(false)
	if f.Enabled() {
		t.Fatal("Enabled after SetEnabled(false)")
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("disabled fault failed: %v", err)
	}
	f.SetEnabled(true)
	if f.Sync() == nil {
		t.Fatal("re-enabled fault did not fail")
	}
	if got := f.Ops()[OpSync]; got != 3 {
		t.Fatalf("Ops[OpSync] = %d, want 3 (disabled ops still numbered)", got)
	}
	if f.Injected() != 2 {
		t.Fatalf("Injected = %d", f.Injected())
	}
}

func TestFaultFirstErrorWins(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	f := NewFault(NewMem())
	f.Add(
		InjectorFunc(func(OpInfo) Effect { return Effect{Delay: time.Millisecond} }),
		InjectorFunc(func(OpInfo) Effect { return Effect{Err: first} }),
		InjectorFunc(func(OpInfo) Effect { return Effect{Err: second, Delay: time.Millisecond} }),
	)
	var slept time.Duration
	f.sleep = func(d time.Duration) { slept += d }
	if err := f.Sync(); err != first {
		t.Fatalf("err = %v, want first", err)
	}
	if slept != 2*time.Millisecond {
		t.Fatalf("slept %v, want the sum 2ms", slept)
	}
}

func TestFaultOpInfo(t *testing.T) {
	var got []OpInfo
	f := NewFault(NewMem(), InjectorFunc(func(info OpInfo) Effect { got = append(got, info); return Effect{} }))
	f.WriteAt(make([]byte, 10), 100)
	f.WriteV([]Extent{{Off: 50, Buf: make([]byte, 3)}, {Off: 7, Buf: make([]byte, 4)}})
	f.WriteAt(make([]byte, 1), 0)
	f.Truncate(33)
	want := []OpInfo{
		{Op: OpWrite, Index: 0, Seq: 0, Off: 100, Len: 10},
		{Op: OpWriteV, Index: 0, Seq: 1, Off: 7, Len: 7},
		{Op: OpWrite, Index: 1, Seq: 2, Off: 0, Len: 1},
		{Op: OpTruncate, Index: 0, Seq: 3, Off: 33},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("OpInfo = %+v\nwant %+v", got, want)
	}
}

func TestFaultClosed(t *testing.T) {
	f := NewFault(NewMem(), Fail(Every(OpAny)))
	f.Close()
	if err := f.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpRead: "read", OpWriteV: "writev", OpSize: "size", OpAny: "any", NumOps: "op(7)"} {
		if op.String() != want {
			t.Errorf("%d.String() = %q, want %q", op, op.String(), want)
		}
	}
}

// TestShortCountIsAnError: ShortCount makes WriteAt lie (n < len(p), nil
// error), as a broken driver does. WriteFull, Counting and a Fault stacked
// on top must each report io.ErrShortWrite instead of success; WriteV has
// no count to lie with and is left alone.
func TestShortCountIsAnError(t *testing.T) {
	p := bytes.Repeat([]byte{7}, 100)
	liar := NewFault(NewMem(), ShortCount(Every(OpWrite), 1))
	n, err := liar.WriteAt(p, 0)
	if err != nil || n >= len(p) {
		t.Fatalf("ShortCount: n %d, err %v; want a short count and no error", n, err)
	}
	if err := WriteFull(liar, p, 0); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("WriteFull over a liar: %v", err)
	}
	for name, d := range map[string]Driver{
		"counting": NewCounting(liar),
		"fault":    NewFault(liar),
	} {
		if n, err := d.WriteAt(p, 0); !errors.Is(err, io.ErrShortWrite) {
			t.Errorf("%s over a liar: n %d, err %v", name, n, err)
		}
	}
	if err := liar.WriteV([]Extent{{Off: 0, Buf: p}}); err != nil {
		t.Fatalf("WriteV: %v", err)
	}
	if err := WriteFull(NewMem(), p, 0); err != nil {
		t.Fatalf("WriteFull on an honest driver: %v", err)
	}
	if err := WriteFull(NewMem(), nil, 0); err != nil {
		t.Fatalf("empty WriteFull: %v", err)
	}
}
