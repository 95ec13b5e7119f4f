package engine

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestShortWriteCountIsAFailure: a driver whose WriteAt reports fewer
// bytes than asked with a nil error (vfd.ShortCount) used to have its
// metadata writes taken as success, so Flush returned nil over a torn
// commit. Every such write must fail the Flush with io.ErrShortWrite.
func TestShortWriteCountIsAFailure(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	fd := vfd.NewFault(vfd.NewMem())
	fd.SetEnabled(false)
	f := tCreate(t, fd, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}})
	must(t, err)
	must(t, ds.Write(ctx, Box([]uint64{0}, []uint64{64}), make([]byte, 64)))
	fd.Add(vfd.ShortCount(vfd.Every(vfd.OpWrite), 3))
	fd.SetEnabled(true)
	if err := f.Flush(ctx); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("flush over short writes: %v", err)
	}
	fd.SetEnabled(false)
	f.Close(ctx)
}
