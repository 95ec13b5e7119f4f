package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

func refWrite(ref []byte, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(ref)) {
		ref = append(ref, make([]byte, end-int64(len(ref)))...)
	}
	copy(ref[off:], p)
	return ref
}

func readAll(t testing.TB, d *Driver) []byte {
	t.Helper()
	n, err := d.Size()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	if n > 0 {
		if _, err := d.ReadAt(buf, 0); err != nil {
			t.Fatalf("read all: %v", err)
		}
	}
	return buf
}

// TestDriverAgainstReference drives random WriteAt, WriteV, Truncate, Sync,
// ReadAt and ReadV against a byte-slice model, and after each Sync checks a
// fresh read-only Driver sees exactly the synced image: reads of pending
// writes, of committed pages, of holes, across the head and page edges.
//
// MaxDirtyBytes of three pages makes writes spill uncommitted pages between
// the Syncs too.
func TestDriverAgainstReference(t *testing.T) {
	key := testKey(t)
	o := testOpts("")
	o.MaxDirtyBytes = 3 * 4096
	d := createT(t, key, o)
	rng := rand.New(rand.NewPCG(1, 2))
	var ref, synced []byte
	const span = 6 * 4096
	for round := range 120 {
		switch op := rng.IntN(10); {
		case op < 3:
			p := make([]byte, rng.IntN(9000)+1)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			off := rng.Int64N(span)
			if _, err := d.WriteAt(p, off); err != nil {
				t.Fatal(err)
			}
			ref = refWrite(ref, p, off)
		case op < 5:
			var exts []vfd.Extent
			off := rng.Int64N(span)
			for range rng.IntN(5) + 1 {
				p := make([]byte, rng.IntN(3000)+1)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				exts = append(exts, vfd.Extent{Off: off, Buf: p})
				off += int64(len(p)) + rng.Int64N(2)*rng.Int64N(500)
			}
			rng.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
			if err := d.WriteV(exts); err != nil {
				t.Fatal(err)
			}
			for _, e := range exts {
				ref = refWrite(ref, e.Buf, e.Off)
			}
		case op == 5:
			size := rng.Int64N(span)
			if err := d.Truncate(size); err != nil {
				t.Fatal(err)
			}
			if size < int64(len(ref)) {
				ref = ref[:size]
			} else {
				ref = append(ref, make([]byte, size-int64(len(ref)))...)
			}
		case op < 8:
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			synced = bytes.Clone(ref)
			r := openT(t, key, Options{ReadOnly: true, Endpoint: testServer.Endpoint(), Insecure: true,
				AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
			if got := readAll(t, r); !bytes.Equal(got, synced) {
				t.Fatalf("round %d: a reader sees %d bytes that differ from the %d synced", round, len(got), len(synced))
			}
			r.Close()
		default:
			// Vector read of random extents inside the file.
			if len(ref) == 0 {
				continue
			}
			var exts []vfd.Extent
			for range rng.IntN(6) + 1 {
				off := rng.Int64N(int64(len(ref)))
				n := rng.Int64N(min(int64(len(ref))-off, 5000)) + 1
				exts = append(exts, vfd.Extent{Off: off, Buf: make([]byte, n)})
			}
			if err := d.ReadV(exts); err != nil {
				t.Fatal(err)
			}
			for _, e := range exts {
				if !bytes.Equal(e.Buf, ref[e.Off:e.End()]) {
					t.Fatalf("round %d: ReadV [%d,%d) differs from the model", round, e.Off, e.End())
				}
			}
		}
		if got := readAll(t, d); !bytes.Equal(got, ref) {
			t.Fatalf("round %d: writer sees an image differing from the model (%d vs %d bytes)", round, len(got), len(ref))
		}
	}
}

func TestDriverShortReadsAndInvalid(t *testing.T) {
	d := createT(t, testKey(t), testOpts(""))
	if _, err := d.WriteAt([]byte("hello"), 5000); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 10)
	if n, err := d.ReadAt(p, 5000); n != 5 || err != io.ErrUnexpectedEOF {
		t.Fatalf("ReadAt past the end: %d, %v; want 5, io.ErrUnexpectedEOF", n, err)
	}
	if n, err := d.ReadAt(p, 5005); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end: %d, %v; want 0, io.EOF", n, err)
	}
	if err := d.ReadV([]vfd.Extent{{Off: 5003, Buf: p}}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadV past the end: %v", err)
	}
	if _, err := d.ReadAt(p, -1); !errors.Is(err, vfd.ErrInvalid) {
		t.Fatalf("negative offset: %v", err)
	}
	if err := d.WriteV([]vfd.Extent{{Off: 0, Buf: p}, {Off: 5, Buf: p}}); !errors.Is(err, vfd.ErrInvalid) {
		t.Fatalf("overlapping WriteV: %v", err)
	}
	if err := d.Truncate(-1); !errors.Is(err, vfd.ErrInvalid) {
		t.Fatalf("negative truncate: %v", err)
	}
	d.Close()
	if _, err := d.ReadAt(p, 0); !errors.Is(err, vfd.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := d.Sync(); !errors.Is(err, vfd.ErrClosed) {
		t.Fatalf("sync after close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestDriverUnsyncedWritesAreNotCommitted: only Sync commits; a writer that
// goes away leaves the last synced image.
func TestDriverUnsyncedWritesAreNotCommitted(t *testing.T) {
	key := testKey(t)
	d := createT(t, key, testOpts(""))
	a := bytes.Repeat([]byte{1}, 10000)
	d.WriteAt(a, 0)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.WriteAt(bytes.Repeat([]byte{2}, 20000), 50)
	d.Close()
	r := openT(t, key, Options{ReadOnly: true, Endpoint: testServer.Endpoint(), Insecure: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if got := readAll(t, r); !bytes.Equal(got, a) {
		t.Fatal("unsynced writes reached the committed image")
	}
}

// TestReadVCoalesces: extents of one page object become one ranged GET;
// extents in different pages become parallel GETs.
func TestReadVCoalesces(t *testing.T) {
	key := testKey(t)
	w := createT(t, key, testOpts(""))
	data := make([]byte, 100+4*4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	w.WriteAt(data, 0)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	o := testOpts("")
	o.ReadOnly = true
	r := openT(t, key, o)
	before := r.Stats().Gets
	// Eight adjacent extents in page 0, eight in page 2, none touching
	// the head (whose read reloads the commit object).
	var exts []vfd.Extent
	for _, base := range []int64{100, 100 + 2*4096} {
		for i := range int64(8) {
			exts = append(exts, vfd.Extent{Off: base + i*256, Buf: make([]byte, 256)})
		}
	}
	if err := r.ReadV(exts); err != nil {
		t.Fatal(err)
	}
	for _, e := range exts {
		if !bytes.Equal(e.Buf, data[e.Off:e.End()]) {
			t.Fatalf("extent at %d: wrong bytes", e.Off)
		}
	}
	if got := r.Stats().Gets - before; got != 2 {
		t.Fatalf("16 extents in 2 page objects took %d GETs, want 2", got)
	}
	// With a gap allowance, extents 100 bytes apart coalesce too.
	o.CoalesceGap = 128
	r2 := openT(t, key, o)
	before = r2.Stats().Gets
	exts = exts[:0]
	for i := range int64(8) {
		exts = append(exts, vfd.Extent{Off: 100 + i*300, Buf: make([]byte, 200)})
	}
	if err := r2.ReadV(exts); err != nil {
		t.Fatal(err)
	}
	for _, e := range exts {
		if !bytes.Equal(e.Buf, data[e.Off:e.End()]) {
			t.Fatalf("gapped extent at %d: wrong bytes", e.Off)
		}
	}
	if got := r2.Stats().Gets - before; got != 1 {
		t.Fatalf("8 extents 100 bytes apart with CoalesceGap 128 took %d GETs, want 1", got)
	}
}

// TestErrorsAreTyped: a missing object, a missing bucket, a denied request
// and a network failure are told apart by errors.Is.
func TestErrorsAreTyped(t *testing.T) {
	ctx := context.Background()
	o := testOpts("")
	o.ReadOnly = true
	_, err := OpenLocation(ctx, Location{Bucket: testBucket, Key: "no/such/key"}, &o)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrDenied) || errors.Is(err, ErrNetwork) {
		t.Fatalf("missing object: %v", err)
	}
	_, err = OpenLocation(ctx, Location{Bucket: "no-such-bucket", Key: "k"}, &o)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing bucket: %v", err)
	}
	bad := o
	bad.SecretKey = "wrong-secret-key"
	_, err = OpenLocation(ctx, Location{Bucket: testBucket, Key: "k"}, &bad)
	if !errors.Is(err, ErrDenied) || !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrNetwork) {
		t.Fatalf("wrong secret: %v", err)
	}
	dead := o
	dead.Endpoint = "127.0.0.1:1" // nothing listens there
	dead.MaxRetries = 2
	_, err = OpenLocation(ctx, Location{Bucket: testBucket, Key: "k"}, &dead)
	if !errors.Is(err, ErrNetwork) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrDenied) {
		t.Fatalf("no server: %v", err)
	}
}

// TestRetriesThrottlingAndServerErrors: 503 SlowDown, 500 and dropped
// connections from the proxy are retried until they pass; a fault that
// outlasts MaxRetries surfaces typed.
func TestRetriesThrottlingAndServerErrors(t *testing.T) {
	p := newProxy(t)
	defer p.Close()
	key := testKey(t)
	w := createT(t, key, testOpts(p.Endpoint()))
	data := bytes.Repeat([]byte("scc!"), 3000)
	w.WriteAt(data, 0)
	var faults = []s3test.Fault{{Status: 503, Code: "SlowDown"}, {Status: 500, Code: "InternalError"}, {Drop: true}}
	p.SetFault(func(n int64, r *http.Request) s3test.Fault {
		if n%2 == 1 { // every other request fails, in turn with each fault
			return faults[(n/2)%3]
		}
		return s3test.Fault{}
	})
	if err := w.Sync(); err != nil {
		t.Fatalf("sync through faults: %v", err)
	}
	got := make([]byte, len(data))
	if _, err := w.ReadAt(got, 0); err != nil {
		t.Fatalf("read through faults: %v", err)
	}
	if w.Stats().Retries == 0 {
		t.Fatal("no retries counted through a faulty proxy")
	}
	p.SetFault(nil)
	o := testOpts(p.Endpoint())
	o.ReadOnly = true
	o.MaxRetries = 2
	r := openT(t, key, o)
	got = got[:100]
	if _, err := r.ReadAt(got, 200); err != nil || !bytes.Equal(got, data[200:300]) {
		t.Fatalf("read back: %v", err)
	}
	p.SetFault(func(int64, *http.Request) s3test.Fault { return s3test.Fault{Status: 503, Code: "SlowDown"} })
	if _, err := r.ReadAt(got, 200); !errors.Is(err, ErrServer) {
		t.Fatalf("persistent SlowDown: %v, want ErrServer", err)
	}
	p.SetFault(func(int64, *http.Request) s3test.Fault { return s3test.Fault{Drop: true} })
	if _, err := r.ReadAt(got, 200); !errors.Is(err, ErrNetwork) {
		t.Fatalf("persistent dropped connections: %v, want ErrNetwork", err)
	}
}

// TestCancellation: a caller's context ends a slow vector read; Close ends
// the requests of every call in flight.
func TestCancellation(t *testing.T) {
	p := newProxy(t)
	defer p.Close()
	key := testKey(t)
	w := createT(t, key, testOpts(p.Endpoint()))
	w.WriteAt(make([]byte, 20000), 0)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	o := testOpts(p.Endpoint())
	o.ReadOnly = true
	r := openT(t, key, o)
	p.SetLatency(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	exts := []vfd.Extent{{Off: 200, Buf: make([]byte, 10)}, {Off: 9000, Buf: make([]byte, 10)}}
	if err := r.ReadVContext(ctx, exts); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadVContext past its deadline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.ReadV(exts) }()
	time.Sleep(20 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, vfd.ErrClosed) {
			t.Fatalf("read cut off by Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a read in flight")
	}
	p.SetLatency(0)
}

// TestSecondWriterRefused: the lease refuses a second writer while the
// first holds the file; Close releases it.
func TestSecondWriterRefused(t *testing.T) {
	key := testKey(t)
	a := createT(t, key, testOpts(""))
	o := testOpts("")
	_, err := OpenLocation(context.Background(), Location{Bucket: testBucket, Key: key}, &o)
	if !errors.Is(err, vfd.ErrLocked) {
		t.Fatalf("second writer: %v, want vfd.ErrLocked", err)
	}
	o.Create = true
	if _, err := OpenLocation(context.Background(), Location{Bucket: testBucket, Key: key}, &o); !errors.Is(err, vfd.ErrLocked) {
		t.Fatalf("second creator: %v, want vfd.ErrLocked", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openT(t, key, testOpts(""))
	b.Close()
}

// abandon stops d as a crashed process would: no lease renewal, no release.
func abandon(d *Driver) {
	close(d.renewStop)
	<-d.renewDone
	d.renewStop = make(chan struct{})
	d.renewDone = make(chan struct{})
	close(d.renewDone)
}

// TestLeaseLapsesAndStaleWriterFails: a writer that stopped renewing loses
// the file to a new writer after LeaseTTL, and its next commit fails its
// If-Match precondition with vfd.ErrLocked, leaving the new writer's state.
func TestLeaseLapsesAndStaleWriterFails(t *testing.T) {
	key := testKey(t)
	o := testOpts("")
	o.LeaseTTL = 300 * time.Millisecond
	a := createT(t, key, o)
	a.WriteAt([]byte("first"), 0)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	abandon(a)
	time.Sleep(400 * time.Millisecond)
	b := openT(t, key, o)
	b.WriteAt([]byte("second"), 0)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	a.WriteAt([]byte("stale!"), 0)
	if err := a.Sync(); !errors.Is(err, vfd.ErrLocked) {
		t.Fatalf("stale writer's sync: %v, want vfd.ErrLocked", err)
	}
	if err := a.Sync(); !errors.Is(err, vfd.ErrLocked) {
		t.Fatalf("stale writer's second sync: %v, want the latched vfd.ErrLocked", err)
	}
	ro := testOpts("")
	ro.ReadOnly = true
	r := openT(t, key, ro)
	if got := readAll(t, r); string(got) != "second" {
		t.Fatalf("file holds %q, want the new writer's %q", got, "second")
	}
}

// TestReaderFollowsWriter: a read-only Driver's reads of the head reload
// the commit object, so it sees each commit of a writer.
func TestReaderFollowsWriter(t *testing.T) {
	key := testKey(t)
	w := createT(t, key, testOpts(""))
	w.WriteAt([]byte("gen-1"), 0)
	w.WriteAt(bytes.Repeat([]byte{1}, 5000), 1000)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	o := testOpts("")
	o.ReadOnly = true
	r := openT(t, key, o)
	for gen := 2; gen < 5; gen++ {
		w.WriteAt([]byte{'g', 'e', 'n', '-', byte('0' + gen)}, 0)
		w.WriteAt(bytes.Repeat([]byte{byte(gen)}, 5000), 1000)
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 5)
		if _, err := r.ReadAt(head, 0); err != nil {
			t.Fatal(err)
		}
		if want := []byte{'g', 'e', 'n', '-', byte('0' + gen)}; !bytes.Equal(head, want) {
			t.Fatalf("reader sees %q, want %q", head, want)
		}
		body := make([]byte, 5000)
		if _, err := r.ReadAt(body, 1000); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, bytes.Repeat([]byte{byte(gen)}, 5000)) {
			t.Fatalf("generation %d: reader's pages are not the writer's", gen)
		}
	}
}

// TestConcurrentDisjoint: many goroutines write, read and sync disjoint
// ranges at once (run under -race); the committed image is the model's.
func TestConcurrentDisjoint(t *testing.T) {
	key := testKey(t)
	d := createT(t, key, testOpts(""))
	const workers, rounds, slot = 16, 12, 1500 // slots straddle pages
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			off := int64(w) * slot
			for r := range rounds {
				p := bytes.Repeat([]byte{byte(w*rounds + r)}, slot)
				if rng.IntN(2) == 0 {
					if _, err := d.WriteAt(p, off); err != nil {
						errs <- err
						return
					}
				} else if err := d.WriteV([]vfd.Extent{{Off: off, Buf: p[:slot/2]}, {Off: off + slot/2, Buf: p[slot/2:]}}); err != nil {
					errs <- err
					return
				}
				got := make([]byte, slot)
				if err := d.ReadV([]vfd.Extent{{Off: off, Buf: got}}); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, p) {
					errs <- errors.New("a goroutine did not read back its own write")
					return
				}
				if rng.IntN(4) == 0 {
					if err := d.Sync(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	o := testOpts("")
	o.ReadOnly = true
	r := openT(t, key, o)
	got := readAll(t, r)
	for w := range workers {
		want := bytes.Repeat([]byte{byte(w*rounds + rounds - 1)}, slot)
		if !bytes.Equal(got[w*slot:(w+1)*slot], want) {
			t.Fatalf("worker %d's last write is not committed", w)
		}
	}
}

// TestLostCommitAnswer: the commit object's PUT lands but its answer is
// lost. With retries, the retry's failed precondition finds the object is
// this very commit (its nonce) and Sync succeeds. Without, Sync fails with
// ErrNetwork; the next Sync finds its own earlier commit in place, fails
// with ErrNetwork (not ErrLocked: no other writer is involved) and latches.
// Either way the store holds a complete synced image.
func TestLostCommitAnswer(t *testing.T) {
	for _, retries := range []int{3, -1} {
		p := newProxy(t)
		defer p.Close()
		key := testKey(t)
		o := testOpts(p.Endpoint())
		o.MaxRetries = retries
		d := createT(t, key, o)
		one := bytes.Repeat([]byte{1}, 9000)
		d.WriteAt(one, 0)
		var dropped atomic.Bool
		p.SetFault(func(n int64, r *http.Request) s3test.Fault {
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+key) && dropped.CompareAndSwap(false, true) {
				return s3test.Fault{DropAfter: true}
			}
			return s3test.Fault{}
		})
		err := d.Sync()
		if retries > 0 {
			if err != nil {
				t.Fatalf("retries %d: sync whose answer was lost: %v", retries, err)
			}
			d.WriteAt(bytes.Repeat([]byte{2}, 100), 0)
			if err := d.Sync(); err != nil {
				t.Fatalf("the sync after: %v", err)
			}
			one = append(bytes.Repeat([]byte{2}, 100), one[100:]...)
		} else {
			if !errors.Is(err, ErrNetwork) {
				t.Fatalf("no retries: sync whose answer was lost: %v, want ErrNetwork", err)
			}
			if err := d.Sync(); !errors.Is(err, ErrNetwork) || errors.Is(err, vfd.ErrLocked) {
				t.Fatalf("no retries: the next sync: %v, want ErrNetwork", err)
			}
		}
		ro := testOpts("")
		ro.ReadOnly = true
		r := openT(t, key, ro)
		if got := readAll(t, r); !bytes.Equal(got, one) {
			t.Fatalf("retries %d: store holds %d bytes, not the synced image", retries, len(got))
		}
	}
}

// pageObjects lists the page objects stored for key.
func pageObjects(t *testing.T, key string) []string {
	t.Helper()
	c, err := s3test.Client(testServer.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for o := range c.ListObjects(context.Background(), testBucket, minio.ListObjectsOptions{Prefix: key + ".pages/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// TestReplacedPagesDeleted: a commit deletes the page objects it replaced,
// a shrink those past the end, and a Create over a file the old file's.
func TestReplacedPagesDeleted(t *testing.T) {
	key := testKey(t)
	d := createT(t, key, testOpts(""))
	d.WriteAt(make([]byte, 100+3*4096), 0) // head + pages 0..2
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(pageObjects(t, key)); n != 3 {
		t.Fatalf("%d page objects after the first commit, want 3", n)
	}
	d.WriteAt([]byte{1}, 100+4096+5) // page 1 again
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(pageObjects(t, key)); n != 3 {
		t.Fatalf("%d page objects after rewriting one, want 3 (the old version deleted)", n)
	}
	if err := d.Truncate(100 + 4096); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(pageObjects(t, key)); n != 1 {
		t.Fatalf("%d page objects after a shrink to one page, want 1", n)
	}
	d.Close()
	createT(t, key, testOpts(""))
	if n := len(pageObjects(t, key)); n != 0 {
		t.Fatalf("%d page objects after a Create over the file, want 0", n)
	}
}

// TestMaxInFlightBounds: a vector read over many page objects runs its
// GETs in parallel, never more than MaxInFlight at once.
func TestMaxInFlightBounds(t *testing.T) {
	p := newProxy(t)
	defer p.Close()
	key := testKey(t)
	w := createT(t, key, testOpts(""))
	w.WriteAt(make([]byte, 100+24*4096), 0)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 4} {
		o := testOpts(p.Endpoint())
		o.ReadOnly = true
		o.MaxInFlight = limit
		r := openT(t, key, o)
		var exts []vfd.Extent
		for pg := range int64(24) {
			exts = append(exts, vfd.Extent{Off: 100 + pg*4096 + 7, Buf: make([]byte, 100)})
		}
		p.SetLatency(20 * time.Millisecond)
		p.ResetMaxActive()
		if err := r.ReadV(exts); err != nil {
			t.Fatal(err)
		}
		p.SetLatency(0)
		if got := p.MaxActive(); got > int64(limit) || (limit > 1 && got < 2) {
			t.Fatalf("MaxInFlight %d: %d requests at once", limit, got)
		}
	}
}

// TestLeaseRenewed: a live writer renews its lease, so a second writer is
// still refused long after LeaseTTL.
func TestLeaseRenewed(t *testing.T) {
	key := testKey(t)
	o := testOpts("")
	// Renewals every 500 ms; a loaded machine must delay one by a second
	// for the lease to lapse.
	o.LeaseTTL = 1500 * time.Millisecond
	createT(t, key, o)
	time.Sleep(3500 * time.Millisecond)
	if _, err := OpenLocation(context.Background(), Location{Bucket: testBucket, Key: key}, &o); !errors.Is(err, vfd.ErrLocked) {
		t.Fatalf("second writer after 3×LeaseTTL beside a live writer: %v, want vfd.ErrLocked", err)
	}
}

// TestSpillBoundsDirtyPages: a writer past MaxDirtyBytes uploads its dirty
// pages without committing them: its memory stays bounded, it reads its
// writes back from the uploaded objects, readers still see the committed
// image, and a writer that dies before Sync leaves that image.
func TestSpillBoundsDirtyPages(t *testing.T) {
	key := testKey(t)
	o := testOpts("")
	o.MaxDirtyBytes = 2 * 4096
	o.LeaseTTL = 300 * time.Millisecond
	d := createT(t, key, o)
	base := bytes.Repeat([]byte{7}, 100+4*4096)
	d.WriteAt(base, 0)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	img := bytes.Clone(base)
	for pg := range 12 {
		p := bytes.Repeat([]byte{byte(pg + 1)}, 4096)
		if _, err := d.WriteAt(p, 100+int64(pg)*4096); err != nil {
			t.Fatal(err)
		}
		img = refWrite(img, p, 100+int64(pg)*4096)
		d.mu.RLock()
		n := len(d.mu.dirty)
		d.mu.RUnlock()
		if int64(n)*4096 > o.MaxDirtyBytes {
			t.Fatalf("after page %d: %d dirty pages held, bound %d bytes", pg, n, o.MaxDirtyBytes)
		}
	}
	if got := readAll(t, d); !bytes.Equal(got, img) {
		t.Fatal("the writer does not read back its spilled writes")
	}
	ro := o
	ro.ReadOnly = true
	r := openT(t, key, ro)
	if got := readAll(t, r); !bytes.Equal(got, base) {
		t.Fatal("a reader sees spilled, uncommitted pages")
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); !bytes.Equal(got, img) {
		t.Fatal("a reader does not see the committed spilled pages")
	}
	if n := len(pageObjects(t, key)); n != 12 {
		t.Fatalf("%d page objects after the commit, want 12 (replaced and orphaned versions deleted)", n)
	}
	// Spill again and die before Sync: the store keeps the last commit.
	for pg := range 6 {
		d.WriteAt(bytes.Repeat([]byte{0xee}, 4096), 100+int64(pg)*4096)
	}
	abandon(d)
	r2 := openT(t, key, ro)
	if got := readAll(t, r2); !bytes.Equal(got, img) {
		t.Fatal("spilled pages of a writer that died before Sync reached the committed image")
	}
}

// TestReadersFollowConcurrently: readers reload the commit object (head
// reads) while other goroutines of the same Driver read pages and a writer
// commits and deletes replaced pages; every page read is at least as new as
// the head read before it (run under -race).
func TestReadersFollowConcurrently(t *testing.T) {
	key := testKey(t)
	w := createT(t, key, testOpts(""))
	const pages = 6
	commit := func(g byte) {
		w.WriteAt([]byte{g}, 0)
		w.WriteAt(bytes.Repeat([]byte{g}, pages*4096), 100)
		if err := w.Sync(); err != nil {
			t.Error(err)
		}
	}
	commit(1)
	o := testOpts("")
	o.ReadOnly = true
	r := openT(t, key, o)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			head, body := make([]byte, 1), make([]byte, pages*4096)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := r.ReadAt(head, 0); err != nil {
					errs <- err
					return
				}
				if err := r.ReadV([]vfd.Extent{{Off: 100, Buf: body}}); err != nil {
					errs <- err
					return
				}
				for _, b := range body {
					if b < head[0] {
						errs <- errors.New("a page read older than the head read before it")
						return
					}
				}
			}
		}()
	}
	for g := byte(2); g < 12; g++ {
		commit(g)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCollectAfterCrash: a writer that dies after spilling and uploading
// pages it never committed leaves garbage; the writer that takes over once
// the lease lapses deletes it, and keeps every committed page.
func TestCollectAfterCrash(t *testing.T) {
	key := testKey(t)
	o := testOpts("")
	o.MaxDirtyBytes = 2 * 4096
	o.LeaseTTL = 300 * time.Millisecond
	a := createT(t, key, o)
	img := bytes.Repeat([]byte{3}, 100+5*4096)
	a.WriteAt(img, 0)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	for pg := range 8 { // spills: uncommitted versions of pages 0..7
		a.WriteAt(bytes.Repeat([]byte{9}, 4096), 100+int64(pg)*4096)
	}
	abandon(a)
	if n := len(pageObjects(t, key)); n <= 5 {
		t.Fatalf("%d page objects: the dead writer left no garbage to collect", n)
	}
	time.Sleep(400 * time.Millisecond)
	b := openT(t, key, o)
	if n := len(pageObjects(t, key)); n != 5 {
		t.Fatalf("%d page objects after the takeover, want the 5 committed", n)
	}
	if got := readAll(t, b); !bytes.Equal(got, img) {
		t.Fatal("collecting lost committed pages")
	}
	if n, err := b.Collect(context.Background()); n != 0 || err != nil {
		t.Fatalf("a second Collect removed %d (%v), want 0", n, err)
	}
}

// TestVanishingPagesBounded: a reader whose page objects are gone at every
// GET (the proxy answers NoSuchKey) tries readRounds rounds, pausing
// between the later ones, then fails with ErrNotFound; a caller's context
// that ends during a pause ends the read with its own error at once.
func TestVanishingPagesBounded(t *testing.T) {
	p := newProxy(t)
	defer p.Close()
	key := testKey(t)
	w := createT(t, key, testOpts(p.Endpoint()))
	w.WriteAt(bytes.Repeat([]byte{7}, 100+2*4096), 0)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	var pageGets atomic.Int64
	p.SetFault(func(_ int64, r *http.Request) s3test.Fault {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, ".pages/") {
			pageGets.Add(1)
			return s3test.Fault{Status: 404, Code: "NoSuchKey"}
		}
		return s3test.Fault{}
	})
	buf := make([]byte, 100)
	_, err := w.ReadAt(buf, 200) // past the head: a page object
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "keep vanishing") {
		t.Fatalf("read of vanishing pages: %v, want ErrNotFound after every round", err)
	}
	if n := pageGets.Load(); n != readRounds {
		t.Fatalf("%d page GETs, want one per round, %d", n, readRounds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := w.ReadAtContext(ctx, buf, 200); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read under a context that ends during the pauses: %v, want its deadline", err)
	}
}
