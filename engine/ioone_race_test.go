package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestRaceReadOneOrdering: many goroutines read small boxes, each inside
// one chunk (the single-chunk path), while writers rewrite pairs of chunks
// with one Write each and a loop flushes and moves the extent.
//
// Each Write covers the two chunks of a pair, left and right, with one
// uint32 value, its generation, which grows per pair. The serializer
// orders a read that overlaps a write wholly before or after it, so:
//   - every box a read returns is one value (no torn mix inside a chunk);
//   - a goroutine that reads one chunk of a pair and then the other never
//     sees an older generation second: had the first read seen the write
//     half done, the second could see the chunk it had not reached yet.
//
// Rows past the base extent come and go with SetExtent (whole chunks, so
// a shrink deletes them and a grow shows the fill value 0): reads there
// may fail with ErrOutOfRange and otherwise must be one value too. Run
// with a cache that holds everything (the single-chunk path serves
// nearly every read) and one that holds a quarter (misses, evictions,
// direct writes).
func TestRaceReadOneOrdering(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"resident", 64 << 20}, {"small", 10 << 10}} {
		t.Run(tc.name, func(t *testing.T) { raceReadOne(t, tc.cache) })
	}
}

func raceReadOne(t *testing.T, cacheBytes int64) {
	const (
		ch      = 16 // chunk edge
		rows    = 4  // chunk rows in the base extent
		pairs   = 4  // pairs of chunks per chunk row
		extra   = 1  // chunk rows that SetExtent adds and removes
		readers = 8
		writers = 4
	)
	reads := 2000
	if testing.Short() {
		reads = 300
	}
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	base := []uint64{rows * ch, pairs * 2 * ch}
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint32, Shape: base, Chunk: []uint64{ch, ch},
		MaxShape: []uint64{(rows + extra) * ch, pairs * 2 * ch}})
	if err != nil {
		t.Fatal(err)
	}
	// pairBox is the Write of pair p (row pr, pair pc).
	pairBox := func(pr, pc int) Selection {
		return Box([]uint64{uint64(pr) * ch, uint64(pc) * 2 * ch}, []uint64{ch, 2 * ch})
	}
	fillVal := func(v uint32) []byte {
		b := make([]byte, ch*2*ch*4)
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], v)
		}
		return b
	}
	var gen [rows * pairs]atomic.Uint32 // last generation started per pair (writer-owned)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, readers+writers+1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
		stop.Store(true)
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				if r.IntN(8) == 0 { // the extra rows: may be out of the extent
					err := ds.Write(ctx, pairBox(rows, r.IntN(pairs)), fillVal(r.Uint32()))
					if err != nil && !errors.Is(err, ErrOutOfRange) {
						fail(fmt.Errorf("write extra: %w", err))
						return
					}
					continue
				}
				// Writer w owns the pairs p with p % writers == w.
				p := w + writers*r.IntN(rows*pairs/writers)
				v := gen[p].Add(1)
				if err := ds.Write(ctx, pairBox(p/pairs, p%pairs), fillVal(v)); err != nil {
					fail(fmt.Errorf("write pair %d: %w", p, err))
					return
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() { // flush and move the extent
		defer wg.Done()
		grown := false
		for i := 0; !stop.Load(); i++ {
			if err := f.Flush(ctx); err != nil {
				fail(fmt.Errorf("flush: %w", err))
				return
			}
			dims := base
			if !grown {
				dims = []uint64{(rows + extra) * ch, base[1]}
			}
			if err := ds.SetExtent(ctx, dims); err != nil {
				fail(fmt.Errorf("set extent %v: %w", dims, err))
				return
			}
			grown = !grown
		}
	}()
	// readBox reads a random box inside chunk (cr, cc) and returns its one
	// value.
	readBox := func(r *rand.Rand, cr, cc int, buf []byte) (uint32, error) {
		h0, w0 := 1+r.Uint64N(4), 1+r.Uint64N(4)
		y := uint64(cr)*ch + r.Uint64N(ch-h0+1)
		x := uint64(cc)*ch + r.Uint64N(ch-w0+1)
		b := buf[:h0*w0*4]
		if err := ds.Read(ctx, Box([]uint64{y, x}, []uint64{h0, w0}), b); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint32(b)
		for i := 4; i < len(b); i += 4 {
			if u := binary.LittleEndian.Uint32(b[i:]); u != v {
				return 0, fmt.Errorf("chunk (%d,%d) box at (%d,%d) %dx%d: torn: %d and %d", cr, cc, y, x, h0, w0, v, u)
			}
		}
		return v, nil
	}
	var rg sync.WaitGroup
	for k := 0; k < readers; k++ {
		rg.Add(1)
		go func(k int) {
			defer rg.Done()
			r := rand.New(rand.NewPCG(uint64(k), 2))
			buf := make([]byte, 16*4)
			for i := 0; i < reads && !stop.Load(); i++ {
				if r.IntN(8) == 0 {
					if _, err := readBox(r, rows, r.IntN(2*pairs), buf); err != nil && !errors.Is(err, ErrOutOfRange) {
						fail(err)
						return
					}
					continue
				}
				pr, pc := r.IntN(rows), r.IntN(pairs)
				first, second := 2*pc, 2*pc+1
				if r.IntN(2) == 0 {
					first, second = second, first
				}
				v1, err := readBox(r, pr, first, buf)
				if err != nil {
					fail(err)
					return
				}
				v2, err := readBox(r, pr, second, buf)
				if err != nil {
					fail(err)
					return
				}
				if v2 < v1 {
					fail(fmt.Errorf("pair (%d,%d): read generation %d in chunk column %d, then %d in column %d: a write seen half done", pr, pc, v1, first, v2, second))
					return
				}
			}
		}(k)
	}
	rg.Wait()
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	// Leave the base extent for the cleanup's consistency check.
	if err := ds.SetExtent(ctx, base); err != nil {
		t.Fatal(err)
	}
}
