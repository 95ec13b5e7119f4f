package s3_test

// Engine-level tests on the real MinIO server: the engine's commit protocol
// over the driver, readers following a writer, two writers, and the fault
// tests (server killed mid-commit, requests failed by the proxy).

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

const cols = 64

// rowsOf is the model's content of rows [start, start+n) of dataset ds at
// version v: int32 little-endian, C order.
func rowsOf(ds string, v, start, n int) []byte {
	b := make([]byte, 0, n*cols*4)
	for r := start; r < start+n; r++ {
		for c := range cols {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(ds)*1000003+v*7919+r*cols+c))
		}
	}
	return b
}

func spec() engine.DatasetSpec {
	return engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{0, cols},
		MaxShape: []uint64{engine.Unlimited, cols}, Chunk: []uint64{4, cols},
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1), engine.CRC32C()}}
}

// engineDrv opens a driver on the test bucket with the engine's default
// geometry (HeadSize = the engine's DataStart) and a small page.
func engineDrv(t testing.TB, key, endpoint string, mut func(*s3.Options)) (*s3.Driver, error) {
	o := s3.TestOpts(endpoint)
	o.PageSize = 64 << 10
	if mut != nil {
		mut(&o)
	}
	return s3.OpenLocation(context.Background(), s3.Location{Bucket: s3.TestBucket, Key: key}, &o)
}

func mustDrv(t testing.TB, key, endpoint string, mut func(*s3.Options)) *s3.Driver {
	t.Helper()
	d, err := engineDrv(t, key, endpoint, mut)
	if err != nil {
		t.Fatalf("open driver %s: %v", key, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func create(o *s3.Options)   { o.Create = true }
func readOnly(o *s3.Options) { o.ReadOnly = true }

// appendRows grows ds to start+n rows and writes the model's rows.
func appendRows(t testing.TB, ds *engine.Dataset, name string, v, start, n int) error {
	ctx := context.Background()
	if err := ds.SetExtent(ctx, []uint64{uint64(start + n), cols}); err != nil {
		return err
	}
	return ds.Write(ctx, engine.Box([]uint64{uint64(start), 0}, []uint64{uint64(n), cols}), rowsOf(name, v, start, n))
}

// verify reads every dataset of f and compares it with want (name → rows,
// all of version v).
func verify(t testing.TB, f *engine.File, want map[string]int, v map[string]int) {
	t.Helper()
	for name, rows := range want {
		ds, err := f.OpenDataset(context.Background(), name, nil)
		if err != nil {
			t.Fatalf("open dataset %s: %v", name, err)
		}
		if got := ds.Shape()[0]; got != uint64(rows) {
			t.Fatalf("dataset %s has %d rows, want %d", name, got, rows)
		}
		buf := make([]byte, rows*cols*4)
		if err := ds.Read(context.Background(), engine.Box([]uint64{0, 0}, []uint64{uint64(rows), cols}), buf); err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if !bytes.Equal(buf, rowsOf(name, v[name], 0, rows)) {
			t.Fatalf("dataset %s: contents differ from the model", name)
		}
	}
}

func check(t testing.TB, d vfd.Driver) {
	t.Helper()
	if rep, err := engine.Check(context.Background(), "", &engine.Options{Driver: d}); err != nil {
		t.Fatalf("engine check: %v (%v)", err, rep)
	}
}

// TestDefaultHeadIsTheSuperblockRegion: the driver's default HeadSize is
// the engine's DataStart (FORMAT.md: the superblock slots end before byte
// 8192; engine/internal/format's TestDataStartIsS3Head holds that side), so
// the superblock slots live in the commit object.
func TestDefaultHeadIsTheSuperblockRegion(t *testing.T) {
	const engineDataStart = 8192
	if s3.DefaultHeadSize != engineDataStart {
		t.Fatalf("s3.DefaultHeadSize %d, engine DataStart %d", s3.DefaultHeadSize, engineDataStart)
	}
}

// TestEngineRoundTrip: create on S3, write datasets, flush, close, open
// again, read back, check.
func TestEngineRoundTrip(t *testing.T) {
	for _, dirty := range []int64{0, 8 << 10} {
		t.Run(fmt.Sprintf("MaxDirtyBytes=%d", dirty), func(t *testing.T) { engineRoundTrip(t, dirty) })
	}
}

func engineRoundTrip(t *testing.T, maxDirty int64) {
	key := s3.TestKey(t)
	d := mustDrv(t, key, "", func(o *s3.Options) {
		create(o)
		if maxDirty != 0 { // small pages, so that the bound is a few of them
			o.PageSize, o.MaxDirtyBytes = 4096, maxDirty
		}
	})
	f, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"a": 200, "b": 37, "c": 1}
	vers := map[string]int{"a": 1, "b": 1, "c": 1}
	for name, rows := range want {
		ds, err := f.CreateDataset(context.Background(), name, spec())
		if err != nil {
			t.Fatal(err)
		}
		if err := appendRows(t, ds, name, 1, 0, rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := mustDrv(t, key, "", func(o *s3.Options) { o.MaxDirtyBytes = maxDirty })
	f2, err := engine.Open(context.Background(), "", &engine.Options{Driver: d2})
	if err != nil {
		t.Fatal(err)
	}
	verify(t, f2, want, vers)
	// Overwrite part of "a" (copy-on-write chunks over committed pages).
	ds, _ := f2.OpenDataset(context.Background(), "a", nil)
	if err := ds.Write(context.Background(), engine.Box([]uint64{0, 0}, []uint64{200, cols}), rowsOf("a", 2, 0, 200)); err != nil {
		t.Fatal(err)
	}
	vers["a"] = 2
	if err := f2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if maxDirty != 0 && d.Stats().Spills+d2.Stats().Spills == 0 {
		t.Fatal("no spills with a MaxDirtyBytes of two pages")
	}
	check(t, d2)
	d2.Close()
	r := mustDrv(t, key, "", readOnly)
	f3, err := engine.Open(context.Background(), "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f3.Close(context.Background())
	verify(t, f3, want, vers)
	check(t, r)
}

// TestEngineConcurrentReaders: many goroutines read random boxes of a
// committed file through one read-only File (and its shared cache) and
// compare with the model.
func TestEngineConcurrentReaders(t *testing.T) {
	key := s3.TestKey(t)
	d := mustDrv(t, key, "", create)
	f, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"x", "y", "z"}
	for _, n := range names {
		ds, _ := f.CreateDataset(context.Background(), n, spec())
		if err := appendRows(t, ds, n, 3, 0, 300); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Close()
	r := mustDrv(t, key, "", readOnly)
	rf, err := engine.Open(context.Background(), "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20 {
				n := names[rng.IntN(len(names))]
				ds, err := rf.OpenDataset(context.Background(), n, nil)
				if err != nil {
					errs <- err
					return
				}
				start, cnt := rng.IntN(290), rng.IntN(10)+1
				buf := make([]byte, cnt*cols*4)
				if err := ds.Read(context.Background(), engine.Box([]uint64{uint64(start), 0}, []uint64{uint64(cnt), cols}), buf); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf, rowsOf(n, 3, start, cnt)) {
					errs <- fmt.Errorf("%s rows [%d,+%d): wrong contents", n, start, cnt)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestEngineSecondWriterRefused: while an engine File writes the object, a
// second writer is refused with engine.ErrLocked; a reader is not.
func TestEngineSecondWriterRefused(t *testing.T) {
	key := s3.TestKey(t)
	d := mustDrv(t, key, "", create)
	f, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if _, err := engineDrv(t, key, "", nil); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("second writer: %v, want engine.ErrLocked", err)
	}
	r := mustDrv(t, key, "", readOnly)
	rf, err := engine.Open(context.Background(), "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatalf("reader beside a writer: %v", err)
	}
	rf.Close(context.Background())
}

// TestEngineReaderFollowsWriter: a read-only File on another s3.Driver (as on
// another machine) sees each of the writer's commits after Refresh.
func TestEngineReaderFollowsWriter(t *testing.T) {
	key := s3.TestKey(t)
	d := mustDrv(t, key, "", create)
	w, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ds, _ := w.CreateDataset(context.Background(), "log", spec())
	if err := appendRows(t, ds, "log", 1, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := mustDrv(t, key, "", readOnly)
	rf, err := engine.Open(context.Background(), "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close(context.Background())
	verify(t, rf, map[string]int{"log": 10}, map[string]int{"log": 1})
	rows := 10
	for round := range 5 {
		if err := appendRows(t, ds, "log", 1, rows, 25); err != nil {
			t.Fatal(err)
		}
		rows += 25
		if round == 2 {
			other, _ := w.CreateDataset(context.Background(), "other", spec())
			if err := appendRows(t, other, "other", 1, 0, 3); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := rf.Refresh(context.Background()); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		want := map[string]int{"log": rows}
		if round >= 2 {
			want["other"] = 3
		}
		verify(t, rf, want, map[string]int{"log": 1, "other": 1})
	}
}

// ingest writes rounds of rows to two datasets through f, flushing after
// each round; acked records what every successful Flush made durable.
type ingestModel struct {
	rows  map[string]int // rows written (acknowledged or not)
	acked map[string]int // rows as of the last Flush that returned nil
}

func (m *ingestModel) round(t testing.TB, f *engine.File, n int) error {
	for _, name := range []string{"p", "q"} {
		ds, err := f.OpenDataset(context.Background(), name, nil)
		if errors.Is(err, engine.ErrNotFound) {
			ds, err = f.CreateDataset(context.Background(), name, spec())
		}
		if err != nil {
			return err
		}
		if err := appendRows(t, ds, name, 1, m.rows[name], n); err != nil {
			return err
		}
		m.rows[name] += n
	}
	if err := f.Flush(context.Background()); err != nil {
		return err
	}
	for k, v := range m.rows {
		m.acked[k] = v
	}
	return nil
}

// reopenAndVerify opens the file read-only straight on the server, checks
// it, and verifies it holds every acknowledged row: the committed state is
// either the last acknowledged one or a later complete one.
func reopenAndVerify(t testing.TB, key string, m *ingestModel) {
	t.Helper()
	r := mustDrv(t, key, "", readOnly)
	check(t, r)
	f, err := engine.Open(context.Background(), "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer f.Close(context.Background())
	for name, acked := range m.acked {
		ds, err := f.OpenDataset(context.Background(), name, nil)
		if err != nil {
			t.Fatalf("acknowledged dataset %s: %v", name, err)
		}
		have := int(ds.Shape()[0])
		if have < acked || have > m.rows[name] {
			t.Fatalf("dataset %s has %d rows; acknowledged %d, written %d", name, have, acked, m.rows[name])
		}
		verify(t, f, map[string]int{name: have}, map[string]int{name: 1})
	}
}

// isCommitPut reports whether r writes the commit object of key.
func isCommitPut(r *http.Request, key string) bool {
	return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+key)
}

func isPagePut(r *http.Request, key string) bool {
	return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/"+key+".pages/")
}

// TestEngineServerKilledMidCommit kills MinIO (SIGKILL) at points of a
// Flush — during the page uploads, just before the commit object's PUT, and
// after the commit PUT landed but before its answer — restarts it, and
// checks the file opens in a committed state holding every acknowledged
// write.
func TestEngineServerKilledMidCommit(t *testing.T) {
	for _, at := range []string{"page", "commit", "commit-landed"} {
		t.Run(at, func(t *testing.T) {
			p := s3.NewProxy(t)
			defer p.Close()
			key := s3.TestKey(t)
			d := mustDrv(t, key, p.Endpoint(), func(o *s3.Options) {
				create(o)
				o.MaxRetries = 2
				o.LeaseTTL = 500 * time.Millisecond
			})
			f, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
			if err != nil {
				t.Fatal(err)
			}
			m := &ingestModel{rows: map[string]int{}, acked: map[string]int{}}
			for range 2 {
				if err := m.round(t, f, 40); err != nil {
					t.Fatal(err)
				}
			}
			var once sync.Once
			p.SetFault(func(n int64, r *http.Request) s3test.Fault {
				hit := false
				switch at {
				case "page":
					hit = isPagePut(r, key)
				case "commit", "commit-landed":
					hit = isCommitPut(r, key)
				}
				if !hit {
					return s3test.Fault{}
				}
				var f s3test.Fault
				once.Do(func() {
					if at == "commit-landed" {
						f = s3test.Fault{DropAfter: true}
						return
					}
					s3.Server().Kill()
					f = s3test.Fault{Drop: true}
				})
				return f
			})
			err = m.round(t, f, 40)
			if at == "commit-landed" {
				// The commit landed but its answer was lost: the
				// driver learns the outcome by reading the commit
				// object back, so the Flush may succeed.
				s3.Server().Kill()
			}
			if at != "commit-landed" && err == nil {
				t.Fatal("Flush succeeded with the server killed")
			}
			if err != nil && !errors.Is(err, engine.ErrIO) {
				t.Fatalf("Flush with the server down: %v, want engine.ErrIO", err)
			}
			f.Close(context.Background())
			d.Close()
			p.SetFault(nil)
			if err := s3.Server().Restart(); err != nil {
				t.Fatal(err)
			}
			reopenAndVerify(t, key, m)
			// A new writer takes over once the dead one's lease
			// lapses, and carries on from the committed state.
			var w *s3.Driver
			for deadline := time.Now().Add(10 * time.Second); ; {
				w, err = engineDrv(t, key, "", nil)
				if err == nil || !errors.Is(err, vfd.ErrLocked) || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("writer after the crash: %v", err)
			}
			defer w.Close()
			wf, err := engine.Open(context.Background(), "", &engine.Options{Driver: w})
			if err != nil {
				t.Fatal(err)
			}
			for name := range m.rows {
				ds, _ := wf.OpenDataset(context.Background(), name, nil)
				m.rows[name] = int(ds.Shape()[0]) // the committed state's, acknowledged or later
			}
			if err := m.round(t, wf, 10); err != nil {
				t.Fatalf("ingest after the takeover: %v", err)
			}
			if err := wf.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			reopenAndVerify(t, key, m)
		})
	}
}

// TestEngineThroughFaultyProxy ingests through a proxy that adds latency,
// throttles (503 SlowDown), fails (500) and drops connections on a share of
// requests. With retries every Flush succeeds; with retries disabled some
// fail. Either way the file opens in a committed state with every
// acknowledged write.
func TestEngineThroughFaultyProxy(t *testing.T) {
	for _, retries := range []int{6, -1} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			p := s3.NewProxy(t)
			defer p.Close()
			key := s3.TestKey(t)
			// Two pages of dirty memory: writes spill between
			// commits, amid the faults too.
			d := mustDrv(t, key, p.Endpoint(), func(o *s3.Options) {
				create(o)
				o.MaxRetries = retries
				o.PageSize, o.MaxDirtyBytes = 4096, 8<<10
			})
			f, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
			if err != nil {
				t.Fatal(err)
			}
			m := &ingestModel{rows: map[string]int{}, acked: map[string]int{}}
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(7, uint64(retries+10)))
			p.SetFault(func(n int64, r *http.Request) s3test.Fault {
				mu.Lock()
				defer mu.Unlock()
				f := s3test.Fault{Delay: time.Duration(rng.IntN(3)) * time.Millisecond}
				switch x := rng.IntN(100); {
				case x < 6:
					f.Status, f.Code = 503, "SlowDown"
				case x < 10:
					f.Status, f.Code = 500, "InternalError"
				case x < 14:
					f.Drop = true
				case x < 16:
					f.DropAfter = true
				}
				return f
			})
			failures := 0
			for range 8 {
				if err := m.round(t, f, 30); err != nil {
					if !errors.Is(err, engine.ErrIO) && !errors.Is(err, engine.ErrLocked) {
						t.Fatalf("round: %v, want engine.ErrIO", err)
					}
					failures++
					break // a failed sync latches: the file must be reopened
				}
			}
			if retries > 0 && failures > 0 {
				t.Fatalf("%d rounds failed despite retries", failures)
			}
			f.Close(context.Background())
			d.Close()
			p.SetFault(nil)
			reopenAndVerify(t, key, m)
			if d.Stats().Retries == 0 && retries > 0 {
				t.Fatal("no retries counted through a faulty proxy")
			}
			if retries > 0 && d.Stats().Spills == 0 {
				t.Fatal("no spills with a MaxDirtyBytes of two pages")
			}
		})
	}
}

// TestEngineErrorsTyped: through the engine, a page object that is gone is
// engine.ErrNotFound, a refused GET engine.ErrDenied, a network failure
// engine.ErrIO — each exactly one of them, none taken for corruption.
func TestEngineErrorsTyped(t *testing.T) {
	p := s3.NewProxy(t)
	defer p.Close()
	key := s3.TestKey(t)
	d := mustDrv(t, key, "", create)
	f, err := engine.Create(context.Background(), "", &engine.Options{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := f.CreateDataset(context.Background(), "a", spec())
	if err := appendRows(t, ds, "a", 1, 0, 64); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Close()
	r := mustDrv(t, key, p.Endpoint(), func(o *s3.Options) { readOnly(o); o.MaxRetries = 1 })
	rf, err := engine.Open(context.Background(), "", &engine.Options{Driver: r, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close(context.Background())
	rds, err := rf.OpenDataset(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	sentinels := []error{engine.ErrNotFound, engine.ErrDenied, engine.ErrIO, engine.ErrCorrupt, engine.ErrStale}
	read := func(what string, want error, fault s3test.Fault) {
		t.Helper()
		p.SetFault(func(n int64, r *http.Request) s3test.Fault {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, ".pages/") {
				return fault
			}
			return s3test.Fault{}
		})
		defer p.SetFault(nil)
		buf := make([]byte, 8*cols*4)
		err := rds.Read(context.Background(), engine.Box([]uint64{8, 0}, []uint64{8, cols}), buf)
		for _, s := range sentinels {
			if errors.Is(err, s) != (s == want) {
				t.Fatalf("%s: %v; want exactly %v", what, err, want)
			}
		}
	}
	read("denied", engine.ErrDenied, s3test.Fault{Status: http.StatusForbidden, Code: "AccessDenied"})
	read("network", engine.ErrIO, s3test.Fault{Drop: true})
	read("missing", engine.ErrNotFound, s3test.Fault{Status: http.StatusNotFound, Code: "NoSuchKey"})
	buf := make([]byte, 8*cols*4)
	if err := rds.Read(context.Background(), engine.Box([]uint64{8, 0}, []uint64{8, cols}), buf); err != nil ||
		!bytes.Equal(buf, rowsOf("a", 1, 8, 8)) {
		t.Fatalf("read after the faults: %v", err)
	}
}
