package vfd

import (
	"sync"
	"sync/atomic"
)

// Mem is an in-memory Driver: a growable byte slice. Reads share a read lock;
// writes, truncates and growth take the write lock, so a vector write lands
// as a whole. Sync does nothing (there is nothing below memory). Safe for
// concurrent use.
type Mem struct {
	closed atomic.Bool

	mu struct {
		sync.RWMutex
		// data is the file; len(data) is its size. See growImage for the
		// invariant on data's spare capacity.
		data []byte
	}
}

var _ Driver = (*Mem)(nil)

// NewMem returns an empty in-memory file.
func NewMem() *Mem { return &Mem{} }

// NewMemFrom returns an in-memory file holding a copy of b, for reopening a
// crash image or a snapshot taken with Bytes.
func NewMemFrom(b []byte) *Mem {
	m := &Mem{}
	m.mu.data = append([]byte(nil), b...)
	return m
}

// Bytes returns a copy of the file's contents. It works after Close too, so
// tests can inspect what a closed engine left behind.
func (m *Mem) Bytes() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]byte(nil), m.mu.data...)
}

func (m *Mem) ReadAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return readFrom(m.mu.data, p, off)
}

func (m *Mem) WriteAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := writeInto(m.mu.data, p, off)
	m.mu.data = data
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (m *Mem) ReadV(exts []Extent) error {
	if m.closed.Load() {
		return ErrClosed
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return readVFrom(m.mu.data, exts)
}

func (m *Mem) WriteV(exts []Extent) error {
	if m.closed.Load() {
		return ErrClosed
	}
	sorted, _, err := sortExtents(exts, true)
	if err != nil || len(sorted) == 0 {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Grow once to the furthest non-empty extent's end so the whole vector
	// either lands or (over the size limit) does not start. Empty extents
	// extend nothing, as with pwritev.
	var end int64
	for _, e := range sorted {
		if len(e.Buf) > 0 {
			end = max(end, e.End())
		}
	}
	data, err := growImage(m.mu.data, end)
	m.mu.data = data
	if err != nil {
		return err
	}
	for _, e := range sorted {
		copy(data[e.Off:], e.Buf)
	}
	return nil
}

func (m *Mem) Sync() error {
	if m.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (m *Mem) Size() (int64, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int64(len(m.mu.data)), nil
}

func (m *Mem) Truncate(size int64) error {
	if m.closed.Load() {
		return ErrClosed
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := resizeImage(m.mu.data, size)
	m.mu.data = data
	return err
}

// Close marks the file closed; its bytes stay readable through Bytes.
func (m *Mem) Close() error {
	m.closed.Store(true)
	return nil
}
