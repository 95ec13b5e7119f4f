package vfd

import (
	"errors"
	"sync"
	"testing"
)

func TestCountingFigures(t *testing.T) {
	c := NewCounting(NewMem())
	mustWrite(t, c, make([]byte, 100), 0)
	if err := c.WriteV([]Extent{{Off: 100, Buf: make([]byte, 50)}, {Off: 150, Buf: make([]byte, 25)}, {Off: 300, Buf: nil}}); err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot()
	c.ReadAt(make([]byte, 10), 170) // short: 5 bytes then io.ErrUnexpectedEOF
	c.ReadV([]Extent{{Off: 0, Buf: make([]byte, 20)}, {Off: 40, Buf: make([]byte, 20)}})
	c.ReadV([]Extent{{Off: 1000, Buf: make([]byte, 1)}}) // fails
	c.WriteV([]Extent{{Off: -1, Buf: make([]byte, 1)}})  // fails
	c.Sync()
	c.Size()
	c.Truncate(10)
	s := c.Snapshot()
	if s.Ops[OpWrite] != 1 || s.Bytes[OpWrite] != 100 || s.Errors[OpWrite] != 0 {
		t.Errorf("write counts: ops %d bytes %d errors %d", s.Ops[OpWrite], s.Bytes[OpWrite], s.Errors[OpWrite])
	}
	if s.Ops[OpWriteV] != 2 || s.Bytes[OpWriteV] != 75 || s.Extents[OpWriteV] != 4 || s.Errors[OpWriteV] != 1 {
		t.Errorf("writev counts: ops %d bytes %d extents %d errors %d", s.Ops[OpWriteV], s.Bytes[OpWriteV], s.Extents[OpWriteV], s.Errors[OpWriteV])
	}
	if s.Ops[OpRead] != 1 || s.Bytes[OpRead] != 5 || s.Errors[OpRead] != 1 {
		t.Errorf("read counts: ops %d bytes %d errors %d", s.Ops[OpRead], s.Bytes[OpRead], s.Errors[OpRead])
	}
	if s.Ops[OpReadV] != 2 || s.Bytes[OpReadV] != 40 || s.Extents[OpReadV] != 3 || s.Errors[OpReadV] != 1 {
		t.Errorf("readv counts: ops %d bytes %d extents %d errors %d", s.Ops[OpReadV], s.Bytes[OpReadV], s.Extents[OpReadV], s.Errors[OpReadV])
	}
	if s.Ops[OpSync] != 1 || s.Ops[OpSize] != 1 || s.Ops[OpTruncate] != 1 {
		t.Errorf("sync/size/truncate ops: %d %d %d", s.Ops[OpSync], s.Ops[OpSize], s.Ops[OpTruncate])
	}
	if s.BytesRead() != 45 || s.BytesWritten() != 175 {
		t.Errorf("BytesRead %d BytesWritten %d", s.BytesRead(), s.BytesWritten())
	}
	d := s.Sub(before)
	if d.Ops[OpWrite] != 0 || d.Ops[OpWriteV] != 1 || d.Ops[OpReadV] != 2 || d.BytesWritten() != 0 || d.BytesRead() != 45 {
		t.Errorf("Sub: %+v", d)
	}
	c.Reset()
	if c.Snapshot() != (Counts{}) {
		t.Errorf("Reset left %+v", c.Snapshot())
	}
	c.Close()
	if _, err := c.Size(); !errors.Is(err, ErrClosed) {
		t.Errorf("Size after Close = %v", err)
	}
	if c.Snapshot().Errors[OpSize] != 1 {
		t.Error("error after Close not counted")
	}
}

func TestCountingConcurrent(t *testing.T) {
	const workers, per = 16, 200
	c := NewCounting(NewMem())
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				c.WriteAt(make([]byte, 3), int64(w*per+i)*3)
				c.WriteV([]Extent{{Off: int64(w*per+i) * 3, Buf: make([]byte, 2)}})
			}
		}()
	}
	wg.Wait()
	s := c.Snapshot()
	if s.Ops[OpWrite] != workers*per || s.Bytes[OpWrite] != 3*workers*per || s.Bytes[OpWriteV] != 2*workers*per || s.Extents[OpWriteV] != workers*per {
		t.Fatalf("concurrent counts off: %+v", s)
	}
}
