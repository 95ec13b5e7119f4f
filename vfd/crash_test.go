package vfd

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestCrashKeepSynced(t *testing.T) {
	c := NewCrash()
	mustWrite(t, c, pattern(3000, 1), 0)
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	atSync := contents(t, c)
	mustWrite(t, c, pattern(500, 2), 100)
	mustWrite(t, c, pattern(500, 3), 5000)
	if err := c.Truncate(4000); err != nil {
		t.Fatal(err)
	}
	if c.Pending() != 3 {
		t.Fatalf("Pending = %d, want 3", c.Pending())
	}
	if img := c.CrashImage(KeepSynced, 0); !bytes.Equal(img, atSync) {
		t.Fatal("KeepSynced image differs from the file at the last Sync")
	}
	if img := c.CrashImage(KeepAll, 0); !bytes.Equal(img, contents(t, c)) {
		t.Fatal("KeepAll image differs from the current file")
	}
	// A second Sync moves the synced state forward.
	c.Sync()
	if c.Pending() != 0 {
		t.Fatal("Sync left pending writes")
	}
	if img := c.CrashImage(KeepSynced, 0); !bytes.Equal(img, contents(t, c)) {
		t.Fatal("after a second Sync, KeepSynced differs from the current file")
	}
}

// TestCrashFailedSyncIsNotDurable stacks Fault on Crash: a Sync failed by
// injection never reaches the Crash, so its writes stay unsynced.
func TestCrashFailedSyncIsNotDurable(t *testing.T) {
	c := NewCrash()
	f := NewFault(c, Fail(Nth(OpSync, 1)))
	mustWrite(t, f, pattern(100, 1), 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, pattern(100, 2), 0)
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("second Sync = %v", err)
	}
	if img := c.CrashImage(KeepSynced, 0); !bytes.Equal(img, pattern(100, 1)) {
		t.Fatal("a failed Sync made writes durable")
	}
}

// TestCrashRandomUnsynced: over many seeds, every unsynced write is absent,
// present or torn at sector granularity (each sector piece all old or all
// new), all three outcomes occur, bytes no write touched keep their synced
// value, and the image is a function of the seed.
func TestCrashRandomUnsynced(t *testing.T) {
	const size = 64 << 10
	c := NewCrash()
	mustWrite(t, c, bytes.Repeat([]byte{0xee}, size), 0)
	c.Sync()
	type write struct {
		off  int64
		data []byte
	}
	var writes []write
	rng := rand.New(rand.NewPCG(7, 7))
	for off := int64(0); off < size; {
		n := min(int64(1+rng.IntN(3000)), size-off)
		if rng.IntN(3) != 0 {
			w := write{off, bytes.Repeat([]byte{byte(len(writes))}, int(n))}
			writes = append(writes, w)
		}
		off += n + int64(rng.IntN(200))
	}
	rng.Shuffle(len(writes), func(i, j int) { writes[i], writes[j] = writes[j], writes[i] })
	for _, w := range writes {
		mustWrite(t, c, w.data, w.off)
	}
	outcomes := map[string]int{}
	for seed := range uint64(40) {
		img := c.CrashImage(RandomUnsynced, seed)
		if !bytes.Equal(img, c.CrashImage(RandomUnsynced, seed)) {
			t.Fatalf("seed %d: image not deterministic", seed)
		}
		if !bytes.Equal(img, c.CrashClone(RandomUnsynced, seed).CrashImage(KeepSynced, 0)) {
			t.Fatalf("seed %d: CrashClone differs from CrashImage", seed)
		}
		if len(img) != size {
			t.Fatalf("seed %d: image size %d", seed, len(img))
		}
		touched := make([]bool, size)
		for _, w := range writes {
			kept, lost := 0, 0
			for pos := w.off; pos < w.off+int64(len(w.data)); {
				next := min((pos/SectorSize+1)*SectorSize, w.off+int64(len(w.data)))
				piece := img[pos:next]
				switch {
				case bytes.Equal(piece, w.data[:len(piece)]):
					kept++
				case bytes.Equal(piece, bytes.Repeat([]byte{0xee}, len(piece))):
					lost++
				default:
					t.Fatalf("seed %d: write at %d: sector piece at %d is neither old nor new", seed, w.off, pos)
				}
				for i := pos; i < next; i++ {
					touched[i] = true
				}
				pos = next
			}
			switch {
			case lost == 0:
				outcomes["present"]++
			case kept == 0:
				outcomes["absent"]++
			default:
				outcomes["torn"]++
			}
		}
		for i, b := range img {
			if !touched[i] && b != 0xee {
				t.Fatalf("seed %d: byte %d, written by nobody, changed", seed, i)
			}
		}
	}
	if outcomes["present"] == 0 || outcomes["absent"] == 0 || outcomes["torn"] == 0 {
		t.Fatalf("outcomes %v: want all three", outcomes)
	}
	if bytes.Equal(c.CrashImage(RandomUnsynced, 1), c.CrashImage(RandomUnsynced, 2)) {
		t.Fatal("seeds 1 and 2 give the same image")
	}
}

// TestCrashRandomTruncate: unsynced operations replay in order, so a truncate
// followed by a write can leave the write's bytes only if they were written
// after the truncate; the image is one of the states the op subsets allow.
func TestCrashRandomTruncate(t *testing.T) {
	c := NewCrash()
	mustWrite(t, c, pattern(4096, 1), 0)
	c.Sync()
	c.Truncate(1024)
	mustWrite(t, c, []byte{0xab}, 2000)
	old := pattern(4096, 1)
	allowed := map[string]bool{
		string(old):        true, // nothing
		string(old[:1024]): true, // truncate only
		string(append(append(old[:1024:1024], make([]byte, 976)...), 0xab)):         true, // both
		string(func() []byte { b := bytes.Clone(old); b[2000] = 0xab; return b }()): true, // write only
	}
	seen := map[string]bool{}
	for seed := range uint64(60) {
		img := c.CrashImage(RandomUnsynced, seed)
		if !allowed[string(img)] {
			t.Fatalf("seed %d: image (size %d) is no ordered subset of the operations", seed, len(img))
		}
		seen[string(img)] = true
	}
	if len(seen) != len(allowed) {
		t.Fatalf("saw %d of the %d possible images", len(seen), len(allowed))
	}
}

func TestCrashCloneIsSynced(t *testing.T) {
	c := NewCrash()
	mustWrite(t, c, []byte("synced"), 0)
	c.Sync()
	mustWrite(t, c, []byte("lost"), 0)
	c.Close()
	clone := c.CrashClone(KeepSynced, 0) // works after Close
	if got := contents(t, clone); string(got) != "synced" {
		t.Fatalf("clone = %q", got)
	}
	if clone.Pending() != 0 || string(clone.CrashImage(KeepSynced, 0)) != "synced" {
		t.Fatal("clone's contents are not synced")
	}
	mustWrite(t, clone, []byte("X"), 0)
	if got := contents(t, c.CrashClone(KeepAll, 0)); string(got) != "losted" {
		t.Fatalf("writing the clone changed the original: %q", got)
	}
}

// TestCrashConcurrent: writers each write, Sync, and write again without
// syncing. A KeepSynced image must hold, in every region, the synced version
// or a later one (another writer's Sync may have covered it), never an older.
func TestCrashConcurrent(t *testing.T) {
	const workers, region, rounds = 16, 1024, 30
	c := NewCrash()
	var wg sync.WaitGroup
	lastSynced := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				v := bytes.Repeat([]byte{byte(r)}, region)
				if _, err := c.WriteAt(v, int64(w*region)); err != nil {
					t.Error(err)
					return
				}
				if r%3 == 0 {
					if err := c.Sync(); err != nil {
						t.Error(err)
						return
					}
					lastSynced[w] = r
				}
				c.ReadAt(make([]byte, 10), int64(w*region))
			}
		}()
	}
	// Crash images taken while writers run must not race.
	for range 20 {
		c.CrashImage(RandomUnsynced, 1)
	}
	wg.Wait()
	img := c.CrashImage(KeepSynced, 0)
	for w := range workers {
		got := img[w*region : (w+1)*region]
		v := int(got[0])
		if v < lastSynced[w] || !bytes.Equal(got, bytes.Repeat([]byte{got[0]}, region)) {
			t.Fatalf("worker %d: region holds version %d, last synced %d", w, v, lastSynced[w])
		}
	}
	if img := c.CrashImage(KeepAll, 0); !bytes.Equal(img, contents(t, c)) {
		t.Fatal("KeepAll differs from the current file")
	}
}

func TestCrashWriteVExtentsIndependent(t *testing.T) {
	c := NewCrash()
	exts := []Extent{{Off: 0, Buf: bytes.Repeat([]byte{1}, 512)}, {Off: 512, Buf: bytes.Repeat([]byte{2}, 512)}}
	if err := c.WriteV(exts); err != nil {
		t.Fatal(err)
	}
	if c.Pending() != 2 {
		t.Fatalf("WriteV of 2 extents recorded %d writes", c.Pending())
	}
}

func TestCrashModeString(t *testing.T) {
	for m, want := range map[CrashMode]string{KeepSynced: "keep-synced", RandomUnsynced: "random-unsynced", KeepAll: "keep-all", 9: "crash-mode(9)"} {
		if got := fmt.Sprint(m); got != want {
			t.Errorf("%d: %q, want %q", m, got, want)
		}
	}
}
