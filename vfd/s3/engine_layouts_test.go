package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd/s3"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// killRows is the row count of every dataset of the kill test: enough that
// a 64 KiB cache holds a fraction of each.
const killRows = 512

// killSpecs is one dataset per layout, rows of rowsOf's int32 content (the
// variable-length one holds each row as one byte sequence).
var killSpecs = []struct {
	name string
	spec engine.DatasetSpec
}{
	{"dense", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{killRows, cols}, Chunk: []uint64{4, cols},
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}}},
	{"contig", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{killRows, cols}, Layout: engine.Contiguous}},
	{"sparse", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{killRows, cols}, Chunk: []uint64{4, cols}, Layout: engine.Sparse}},
	{"vlen", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{killRows}, Chunk: []uint64{4}, Layout: engine.Vlen,
		Filters: []engine.Filter{engine.Zstd(1)}}},
}

// killModel records, per dataset and row, the versions whose Write
// returned nil (in order), the versions whose Write failed, and the version
// the last acknowledged commit holds (0: never written).
type killModel struct {
	ok     map[string][][]int
	failed map[string][]map[int]bool
	acked  map[string][]int
}

func newKillModel() *killModel {
	m := &killModel{ok: map[string][][]int{}, failed: map[string][]map[int]bool{}, acked: map[string][]int{}}
	for _, ks := range killSpecs {
		m.ok[ks.name] = make([][]int, killRows)
		m.failed[ks.name] = make([]map[int]bool, killRows)
		m.acked[ks.name] = make([]int, killRows)
	}
	return m
}

func (m *killModel) last(name string, row int) int {
	if v := m.ok[name][row]; len(v) > 0 {
		return v[len(v)-1]
	}
	return 0
}

func (m *killModel) ack() {
	for name := range m.acked {
		for row := range m.acked[name] {
			m.acked[name][row] = m.last(name, row)
		}
	}
}

// writeRow writes version v of row into ds.
func writeRow(ctx context.Context, ds *engine.Dataset, name string, row, v int) error {
	b := rowsOf(name, v, row, 1)
	if ds.Layout() == engine.Vlen {
		return ds.WriteVlen(ctx, engine.Box([]uint64{uint64(row)}, []uint64{1}), [][]byte{b})
	}
	return ds.Write(ctx, engine.Box([]uint64{uint64(row), 0}, []uint64{1, cols}), b)
}

// rowVersion reads row of ds and returns the version it holds among
// candidates (0 is the fill value), or an error naming what it holds.
func rowVersion(ctx context.Context, ds *engine.Dataset, name string, row int, candidates []int) (int, error) {
	var got []byte
	if ds.Layout() == engine.Vlen {
		vals, err := ds.ReadVlen(ctx, engine.Box([]uint64{uint64(row)}, []uint64{1}))
		if err != nil {
			return 0, err
		}
		got = vals[0]
	} else {
		got = make([]byte, cols*4)
		if err := ds.Read(ctx, engine.Box([]uint64{uint64(row), 0}, []uint64{1, cols}), got); err != nil {
			return 0, err
		}
	}
	for _, v := range candidates {
		want := rowsOf(name, v, row, 1)
		if v == 0 {
			if ds.Layout() == engine.Vlen {
				want = nil
			} else {
				want = make([]byte, cols*4)
			}
		}
		if bytes.Equal(got, want) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s row %d holds none of the versions %v", name, row, candidates)
}

// TestEngineServerKilledMidWriteEveryLayout kills MinIO (SIGKILL) in the
// middle of a round of writes through a cache much smaller than the data,
// so that the kill lands on the write-back of evicted chunks, restarts it
// at the first failed call, and goes on writing and flushing. Every layout,
// one dataset each. The reopened file must pass Check, and each row must
// hold a version the model allows: the one the last acknowledged commit
// holds or one written successfully after it, and never a version whose
// Write returned an error.
func TestEngineServerKilledMidWriteEveryLayout(t *testing.T) {
	runs := 2
	if os.Getenv("SCC_STRESS") == "long" {
		runs = 12
	}
	for run := range runs {
		t.Run(fmt.Sprint(run), func(t *testing.T) { killMidWrite(t, uint64(run)) })
	}
}

func killMidWrite(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 41))
	p := s3.NewProxy(t)
	defer p.Close()
	key := s3.TestKey(t)
	d := mustDrv(t, key, p.Endpoint(), func(o *s3.Options) {
		create(o)
		o.MaxRetries = 1
	})
	f, err := engine.Create(ctx, "", &engine.Options{Driver: d, CacheConfig: cache.Config{QuiescentBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]*engine.Dataset{}
	for _, ks := range killSpecs {
		if sets[ks.name], err = f.CreateDataset(ctx, ks.name, ks.spec); err != nil {
			t.Fatal(err)
		}
	}
	m := newKillModel()
	failures := 0
	// round writes version v of n random rows of every dataset, noting
	// each call's outcome, then flushes. restart, when set, brings the
	// server back at the first failed call.
	var down sync.Mutex
	killed := false
	revive := func() {
		down.Lock()
		defer down.Unlock()
		if killed {
			killed = false
			p.SetFault(nil)
			if err := s3.Server().Restart(); err != nil {
				t.Fatal(err)
			}
		}
	}
	round := func(v, n int) error {
		for range n {
			ks := killSpecs[rng.IntN(len(killSpecs))]
			row := rng.IntN(killRows)
			err := writeRow(ctx, sets[ks.name], ks.name, row, v)
			if err == nil {
				m.ok[ks.name][row] = append(m.ok[ks.name][row], v)
				continue
			}
			if !errors.Is(err, engine.ErrIO) {
				t.Fatalf("write %s row %d: %v, want ErrIO", ks.name, row, err)
			}
			failures++
			if m.failed[ks.name][row] == nil {
				m.failed[ks.name][row] = map[int]bool{}
			}
			m.failed[ks.name][row][v] = true
			revive()
		}
		if err := f.Flush(ctx); err != nil {
			return err
		}
		m.ack()
		return nil
	}
	for v := 1; v <= 2; v++ {
		if err := round(v, 120); err != nil {
			t.Fatal(err)
		}
	}
	// Kill the server at a request some way into the next round: the
	// cache is full, so that request is most likely an evicted chunk's
	// write-back or a page read under it.
	start, after := p.Requests(), int64(5+rng.IntN(120))
	var once sync.Once
	p.SetFault(func(n int64, r *http.Request) s3test.Fault {
		if n < start+after {
			return s3test.Fault{}
		}
		var fl s3test.Fault
		once.Do(func() {
			down.Lock()
			killed = true
			down.Unlock()
			s3.Server().Kill()
			fl = s3test.Fault{Drop: true}
		})
		return fl
	})
	for v := 3; v <= 5; v++ {
		if err := round(v, 120); err != nil {
			if !errors.Is(err, engine.ErrIO) {
				t.Fatalf("flush: %v, want ErrIO", err)
			}
			failures++
		}
	}
	revive() // the kill came after the last failed call
	closeErr := f.Close(ctx)
	if closeErr == nil {
		m.ack()
	}
	d.Close()
	revive() // the kill came in Close
	t.Logf("%d failed calls; close: %v", failures, closeErr)

	r := mustDrv(t, key, "", readOnly)
	check(t, r)
	rf, err := engine.Open(ctx, "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer rf.Close(ctx)
	for _, ks := range killSpecs {
		ds, err := rf.OpenDataset(ctx, ks.name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for row := range killRows {
			// Allowed: the acknowledged version, or one written with
			// success after it.
			acked := m.acked[ks.name][row]
			allowed := []int{acked}
			okv := m.ok[ks.name][row]
			if i := slices.Index(okv, acked); i >= 0 || acked == 0 {
				allowed = append(allowed, okv[i+1:]...)
			}
			got, err := rowVersion(ctx, ds, ks.name, row, append(allowed, 1, 2, 3, 4, 5))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(allowed, got) {
				how := "an older version"
				if m.failed[ks.name][row][got] {
					how = "a version whose Write returned an error"
				}
				t.Fatalf("%s row %d holds version %d, %s; allowed %v", ks.name, row, got, how, allowed)
			}
		}
	}
}
