package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestNewerVersionIsNotCorruption: a file whose superblocks are intact but
// of a version this scc does not read is refused at open with ErrVersion,
// which is not ErrCorrupt (FORMAT.md §15), and Check says the same.
func TestNewerVersionIsNotCorruption(t *testing.T) {
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil, noCheck("the test rewrites the superblocks with a newer format version"))
	if _, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, slot := range []int64{format.SlotA, format.SlotB} {
		b := make([]byte, format.SlotSize)
		if _, err := drv.ReadAt(b, slot); err != nil {
			t.Fatal(err)
		}
		if b[0] == 0 {
			continue // slot never written
		}
		b[4] = format.Version + 1
		n := len(b) - 4
		sum := format.Checksum(b[:n])
		b[n], b[n+1], b[n+2], b[n+3] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
		if _, err := drv.WriteAt(b, slot); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(context.Background(), "", &Options{Driver: drv})
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("open of a newer file: %v, want ErrVersion and not ErrCorrupt", err)
	}
	if _, err := Check(t.Context(), "", &Options{Driver: drv}); !errors.Is(err, ErrVersion) {
		t.Fatalf("check of a newer file: %v, want ErrVersion", err)
	}
}
