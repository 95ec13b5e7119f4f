package cache

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHitWritesNoSharedMemory: read hits write nothing that every
// goroutine reads — not the Cache, the Dataset, the File, an entry or a
// bucket of the chunk table — only their P's read slot (latch.go), so
// that hits on several cores never pass a written line between them. The
// replayer, which writes entries and the policy by design, is kept out
// by holding the policy lock (hits never take it). A store that leaves a
// value as it was does not show here (it still takes the line from the
// other cores): the hit path checks before it stores such words
// (slotRead, partial).
func TestHitWritesNoSharedMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the snapshots read words that background goroutines change atomically")
	}
	e := newEnv(t, Config{QuiescentBytes: 64 << 20})
	d, l := e.dataset(1, -1, 64)
	const n = 64
	buf := make([]byte, 64)
	reqs := make([][]Request, n)
	for i := range reqs {
		require.NoError(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
		reqs[i] = []Request{fullReq(d, l, buf, uint64(i))}
	}
	require.NoError(t, e.f.Flush(bg))
	for k := 0; k < 4*n; k++ { // every chunk hit before: one-time work done
		require.NoError(t, e.c.Read(bg, reqs[k%n]))
	}
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var regions []memRegion
	add := func(name string, p any) {
		v := reflect.ValueOf(p)
		regions = append(regions, memRegion{name: name, t: v.Type().Elem(), p: v.UnsafePointer()})
	}
	add("Cache", c)
	add("Dataset", d)
	add("File", e.f)
	c.chunks.Range(func(_ chunkKey, en *entry) bool { add("entry", en); return true })
	a := c.chunks.short.cur.Load()
	for i := range a.buckets {
		add("bucket", &a.buckets[i])
	}
	for i := range regions {
		regions[i].before = regions[i].bytes()
	}
	for k := 0; k < 16*n; k++ {
		require.NoError(t, c.Read(bg, reqs[(k*7)%n]))
	}
	for _, r := range regions {
		for _, f := range r.changed() {
			if r.name == "Cache" && f == "mu" {
				continue // held here; the replayer waits on it
			}
			assert.Fail(t, "a hit wrote shared memory", "%s.%s", r.name, f)
		}
	}
}

// memRegion is a struct's bytes, to tell which fields changed.
type memRegion struct {
	name   string
	t      reflect.Type
	p      unsafe.Pointer
	before []byte
}

func (r *memRegion) bytes() []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(r.p), r.t.Size())...)
}

// changed names the top-level fields whose bytes differ from before.
func (r *memRegion) changed() []string {
	now := r.bytes()
	var out []string
	for i := 0; i < r.t.NumField(); i++ {
		f := r.t.Field(i)
		if string(now[f.Offset:f.Offset+f.Type.Size()]) != string(r.before[f.Offset:f.Offset+f.Type.Size()]) {
			out = append(out, f.Name)
		}
	}
	if len(out) == 0 && string(now) != string(r.before) {
		out = append(out, fmt.Sprintf("padding of %s", r.t))
	}
	return out
}
