package cache

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoSkipsTable: a read whose Memo names its resident chunk is served
// from the memo's entry without the chunk table: with the entry taken out
// of the table behind the cache's back it is still a hit, where a read
// without the memo misses. A memo of another chunk is not used, and a
// memo whose entry was dropped finds the chunk's new entry.
func TestMemoSkipsTable(t *testing.T) {
	e, d, l, en := residentEntry(t)
	var m Memo
	got := make([]byte, 16)
	req := fullReq(d, l, got, 0)
	req.Memo = &m
	require.NoError(t, e.c.Read(bg, []Request{req}))
	require.Same(t, en, m.e, "the hit remembered its entry")
	assert.Equal(t, pattern(16, 1), got)

	// Out of the table, still resident: only the memo finds it.
	require.True(t, e.c.chunks.CompareAndDelete(en.key, func(v *entry) bool { return v == en }))
	before := e.c.Stats()
	clear(got)
	n, err := e.c.ServeResident(bg, false, []Request{req})
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a memo hit needs no table")
	assert.Equal(t, pattern(16, 1), got)
	plain := fullReq(d, l, make([]byte, 16), 0)
	n, err = e.c.ServeResident(bg, false, []Request{plain})
	require.NoError(t, err)
	assert.Equal(t, 0, n, "without the memo the table misses")
	assert.Equal(t, before.Misses, e.c.Stats().Misses)
	_, loaded := e.c.chunks.LoadOrStore(en)
	require.False(t, loaded)

	// Another chunk with the same memo: looked up, and remembered.
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 2), 1)}))
	other := fullReq(d, l, got, 1)
	other.Memo = &m
	require.NoError(t, e.c.Read(bg, []Request{other}))
	assert.Equal(t, pattern(16, 2), got)
	require.NotSame(t, en, m.e)
	assert.Equal(t, 1, m.rank)
	assert.Equal(t, uint64(1), m.coord[0])

	// The remembered entry dropped (it dies): the read finds the chunk
	// again through the table, and the memo follows.
	require.NoError(t, e.c.Read(bg, []Request{req}))
	require.Same(t, en, m.e)
	must(t, e.c.Flush(bg))
	must(t, d.Invalidate(bg))
	require.NotEqual(t, stateResident, en.state())
	clear(got)
	require.NoError(t, e.c.Read(bg, []Request{req})) // a miss: loads the chunk again
	assert.Equal(t, pattern(16, 1), got)
	clear(got)
	require.NoError(t, e.c.Read(bg, []Request{req})) // a hit on the new entry
	assert.Equal(t, pattern(16, 1), got)
	require.NotSame(t, en, m.e, "a dead entry is not kept")
	fresh, ok := e.c.chunks.Load(en.key)
	require.True(t, ok)
	assert.Same(t, fresh, m.e)
}

// TestMemoPrune: Prune keeps a resident entry and drops one that is not,
// so that a pooled memo does not keep a dropped chunk's entry alive.
func TestMemoPrune(t *testing.T) {
	e, d, l, en := residentEntry(t)
	var m Memo
	req := fullReq(d, l, make([]byte, 16), 0)
	req.Memo = &m
	require.NoError(t, e.c.Read(bg, []Request{req}))
	m.Prune()
	require.Same(t, en, m.e)
	must(t, e.c.Flush(bg))
	must(t, d.Invalidate(bg))
	m.Prune()
	assert.Nil(t, m.e)
	assert.Nil(t, m.d)
}

// TestMemoReadersRacingChanges: readers that each keep a memo read chunks
// while a writer rewrites them whole and another goroutine drops them
// (Invalidate) again and again; every read returns one write's bytes
// whole, under the race detector. A memo's entry that died is never read
// from (the detector would report the chunk's release against the copy).
func TestMemoReadersRacingChanges(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 64)
	const chunks = 4
	for c := uint64(0); c < chunks; c++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, bytes.Repeat([]byte{1}, 64), c)}))
	}
	var wg sync.WaitGroup
	var reads atomic.Int64
	stop := make(chan struct{})
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var m Memo
			buf := make([]byte, 64)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Runs of reads of one chunk, so that the memo is used.
				req := fullReq(d, l, buf, uint64((i/8+g)%chunks))
				req.Memo = &m
				if err := e.c.Read(bg, []Request{req}); err != nil {
					t.Error(err)
					return
				}
				for _, b := range buf {
					if b != buf[0] {
						t.Errorf("torn read %v", buf)
						return
					}
				}
				reads.Add(1)
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := e.c.Flush(bg); err != nil {
				t.Error(err)
				return
			}
			if err := d.Invalidate(bg); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for v := 2; v < 200 || reads.Load() < 5000 && !t.Failed(); v++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, bytes.Repeat([]byte{byte(v)}, 64), uint64(v)%chunks)}))
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
}
