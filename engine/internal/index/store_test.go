package index

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	errStoreRange = errors.New("memstore: access outside any block")
	errInjected   = errors.New("memstore: injected failure")
)

// memStore is an in-memory Store that checks the copy-on-write contract:
//
//   - a write must land inside a block allocated since the last commit
//     (blocks a committed state may reference are never overwritten);
//   - Free must name a whole live block, never one already freed;
//   - a read must land inside a live block or a block freed since the last
//     commit (the committed state may still reference it);
//   - freed space is reused only after commit, and is scribbled over then,
//     so a stale reference fails its checksum.
//
// Violations are reported through t.Errorf (safe from any goroutine).
type memStore struct {
	t testing.TB

	mu struct {
		sync.Mutex
		data    []byte
		epoch   int             // commits so far
		live    map[int64]block // allocated, not freed
		pending map[int64]block // freed since the last commit
		holes   []block         // reusable space
		end     int64           // bump pointer
		frees   int
	}

	reads, writes, written atomic.Int64
	// failAfter > 0 makes the failAfter-th following Alloc or WriteAt fail.
	failAfter atomic.Int64
}

type block struct {
	off, size int64
	epoch     int
}

func newMemStore(t testing.TB) *memStore {
	s := &memStore{t: t}
	s.mu.live = map[int64]block{}
	s.mu.pending = map[int64]block{}
	s.mu.end = 512 // offset 0 is the nil pointer
	return s
}

func (s *memStore) inject() error {
	if n := s.failAfter.Load(); n > 0 {
		if s.failAfter.Add(-1) == 0 {
			return errInjected
		}
	}
	return nil
}

// containing returns the block of m holding [off, off+n).
func containing(m map[int64]block, off, n int64) (block, bool) {
	for _, b := range m {
		if off >= b.off && off+n <= b.off+b.size {
			return b, true
		}
	}
	return block{}, false
}

func (s *memStore) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.live[off]; !ok {
		if _, ok := s.mu.pending[off]; !ok {
			if _, ok := containing(s.mu.live, off, int64(len(p))); !ok {
				return fmt.Errorf("%w: read %d bytes at %d", errStoreRange, len(p), off)
			}
		}
	}
	if off+int64(len(p)) > int64(len(s.mu.data)) {
		return fmt.Errorf("%w: read past end", errStoreRange)
	}
	copy(p, s.mu.data[off:])
	return nil
}

func (s *memStore) WriteAt(ctx context.Context, p []byte, off int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.inject(); err != nil {
		return err
	}
	s.writes.Add(1)
	s.written.Add(int64(len(p)))
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.mu.live[off]
	if !ok || int64(len(p)) > b.size {
		b, ok = containing(s.mu.live, off, int64(len(p)))
	}
	if !ok {
		s.t.Errorf("memstore: write of %d bytes at %d outside any live block", len(p), off)
		return errStoreRange
	}
	if b.epoch != s.mu.epoch {
		s.t.Errorf("memstore: write at %d overwrites block [%d,+%d) of committed epoch %d", off, b.off, b.size, b.epoch)
		return errStoreRange
	}
	copy(s.mu.data[off:], p)
	return nil
}

func (s *memStore) Alloc(size int64) (int64, error) {
	if err := s.inject(); err != nil {
		return 0, err
	}
	if size <= 0 {
		s.t.Errorf("memstore: alloc of %d bytes", size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	off := int64(-1)
	for i, h := range s.mu.holes {
		if h.size >= size {
			off = h.off
			if h.size == size {
				s.mu.holes = append(s.mu.holes[:i], s.mu.holes[i+1:]...)
			} else {
				s.mu.holes[i] = block{off: h.off + size, size: h.size - size}
			}
			break
		}
	}
	if off < 0 {
		off = s.mu.end
		s.mu.end += size
		if int64(len(s.mu.data)) < s.mu.end {
			s.mu.data = append(s.mu.data, make([]byte, s.mu.end-int64(len(s.mu.data)))...)
		}
	}
	s.mu.live[off] = block{off: off, size: size, epoch: s.mu.epoch}
	return off, nil
}

func (s *memStore) Free(off, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.mu.live[off]
	switch {
	case !ok:
		if _, again := s.mu.pending[off]; again {
			s.t.Errorf("memstore: block at %d freed twice", off)
		} else {
			s.t.Errorf("memstore: free of unknown block at %d", off)
		}
		return
	case b.size != size:
		s.t.Errorf("memstore: free of block at %d with size %d, allocated %d", off, size, b.size)
	}
	delete(s.mu.live, off)
	s.mu.frees++
	s.mu.pending[off] = b
}

// commit plays the container's commit: space freed before it becomes
// reusable (and is scribbled over), and every block allocated so far
// becomes immutable.
func (s *memStore) commit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for off, b := range s.mu.pending {
		for i := b.off; i < b.off+b.size; i++ {
			s.mu.data[i] = 0xEE
		}
		s.mu.holes = append(s.mu.holes, b)
		delete(s.mu.pending, off)
	}
	sort.Slice(s.mu.holes, func(i, j int) bool { return s.mu.holes[i].off < s.mu.holes[j].off })
	s.mu.epoch++
}

// liveSet returns the live blocks as off → size.
func (s *memStore) liveSet() map[int64]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[int64]int64{}
	for off, b := range s.mu.live {
		m[off] = b.size
	}
	return m
}

// corrupt flips a byte of the live block at off.
func (s *memStore) poke(off int64, f func(b []byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.mu.live[off]
	f(s.mu.data[off : off+b.size])
}

// TestMemStoreChecks shows the test store catches what it must.
func TestMemStoreChecks(t *testing.T) {
	ctx := context.Background()
	rec := &recordingTB{TB: t}
	s := newMemStore(rec)
	off, _ := s.Alloc(16)
	if err := s.WriteAt(ctx, make([]byte, 16), off); err != nil {
		t.Fatal(err)
	}
	s.commit()
	_ = s.WriteAt(ctx, make([]byte, 4), off)
	if rec.n != 1 {
		t.Fatalf("overwrite of a committed block not reported (%d reports)", rec.n)
	}
	s.Free(off, 16)
	s.Free(off, 16)
	if rec.n != 2 {
		t.Fatalf("double free not reported (%d reports)", rec.n)
	}
	s.commit()
	if err := s.ReadAt(ctx, make([]byte, 4), off); !errors.Is(err, errStoreRange) {
		t.Fatalf("read of reused space: %v", err)
	}
}

type recordingTB struct {
	testing.TB
	n int
}

func (r *recordingTB) Errorf(string, ...any) { r.n++ }
