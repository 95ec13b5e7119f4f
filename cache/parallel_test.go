package cache

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
)

// meetLayout is a fakeLayout whose Scatter and Gather wait until want of
// them are running at once: a request whose pieces are served one after
// another never gets there, and the wait's bound turns that into an error
// instead of a hang (the bound is not a speed assertion: the pieces that
// run in parallel meet at once).
type meetLayout struct {
	*fakeLayout
	want    int64
	running atomic.Int64
	once    sync.Once
	met     chan struct{}
	failed  atomic.Bool
	meets   atomic.Int64 // pieces that saw the meeting
}

var errNeverMet = errors.New("test: pieces of one request never ran at once")

func newMeetLayout(l *fakeLayout, want int64) *meetLayout {
	return &meetLayout{fakeLayout: l, want: want, met: make(chan struct{})}
}

func (l *meetLayout) meet() error {
	defer l.running.Add(-1)
	if l.running.Add(1) >= l.want {
		l.once.Do(func() { close(l.met) })
	}
	if l.failed.Load() {
		return errNeverMet
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-l.met:
		l.meets.Add(1)
		return nil
	case <-t.C:
		l.failed.Store(true)
		return errNeverMet
	}
}

func (l *meetLayout) Scatter(ch layout.Chunk, p layout.Piece) error {
	if err := l.meet(); err != nil {
		return err
	}
	return l.fakeLayout.Scatter(ch, p)
}

func (l *meetLayout) Gather(ch layout.Chunk, p layout.Piece) error {
	if err := l.meet(); err != nil {
		return err
	}
	return l.fakeLayout.Gather(ch, p)
}

// TestManyChunkRequestsRunInParallel: a Write that creates many chunks and
// a Read that loads them serve their chunks' pieces on the workers at once
// (the copies between the caller's buffer and the chunks are most of such
// a request's work), and both still move the right bytes.
func TestManyChunkRequestsRunInParallel(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, Workers: 4})
	fl := newFakeLayout(&e.alloc, 64<<10)
	l := newMeetLayout(fl, 3)
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	cb := int(fl.chunkBytes())
	want := pattern(n*cb, 5)
	reqs := func(buf []byte) []Request {
		rs := make([]Request, n)
		for i := range rs {
			rs[i] = fullReq(d, fl, buf[i*cb:(i+1)*cb], uint64(i))
		}
		return rs
	}
	if err := e.c.Write(ctx, reqs(want)); err != nil {
		t.Fatalf("write: %v", err)
	}
	if l.meets.Load() == 0 {
		t.Fatal("the write's gathers never ran at once")
	}
	if err := d.Invalidate(ctx); err != nil { // written back and dropped: the read loads them
		t.Fatal(err)
	}
	l.meets.Store(0)
	l.once = sync.Once{}
	l.met = make(chan struct{})
	got := make([]byte, len(want))
	if err := e.c.Read(ctx, reqs(got)); err != nil {
		t.Fatalf("read: %v", err)
	}
	if l.meets.Load() == 0 {
		t.Fatal("the read's scatters never ran at once")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read returned other bytes than were written")
	}
	if fl.decodes.Load() != n {
		t.Fatalf("%d decodes, want %d", fl.decodes.Load(), n)
	}
}
