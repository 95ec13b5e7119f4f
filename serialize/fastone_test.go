package serialize

import (
	"context"
	"testing"
)

// TestFastReadDatasetHoldsLikeFastRead: the dataset-only fast hold counts
// as a reader of its shard exactly as TryFastRead's does: it takes no
// ticket, a writer registered on the dataset waits for it and turns new
// ones away, and they resume once the writer is done.
func TestFastReadDatasetHoldsLikeFastRead(t *testing.T) {
	s := New()
	h, ok := s.TryFastReadDataset(1)
	if !ok {
		t.Fatal("fast read refused with no writer")
	}
	if s.ticket.Load() != 0 || inFlight(s) != 0 {
		t.Fatalf("fast read took ticket %d, %d list entries", s.ticket.Load(), inFlight(s))
	}
	if n := s.readers.sum(shardOf(1)); n != 1 {
		t.Fatalf("reader count %d, want 1", n)
	}
	w := async(s, context.Background(), wr(box2(1, 5, 6, 5, 6)))
	waitWaiting(t, s, 1)
	notYet(t, w, "write while a dataset fast read is in")
	if _, ok := s.TryFastReadDataset(1); ok {
		t.Fatal("dataset fast read accepted while a writer is registered")
	}
	h.Release()
	granted(t, w)()
	h2, ok := s.TryFastReadDataset(1)
	if !ok {
		t.Fatal("dataset fast read refused after the writer left")
	}
	h2.Release()
	// An exclusive acquire (SetExtent) drains it the same way.
	h3, _ := s.TryFastReadDataset(1)
	ex := asyncExclusive(s, context.Background(), 1)
	waitWaiting(t, s, 1)
	notYet(t, ex, "exclusive while a dataset fast read is in")
	h3.Release()
	granted(t, ex)()
	if n := s.readers.sum(shardOf(1)); n != 0 {
		t.Fatalf("reader count %d after release", n)
	}
}
