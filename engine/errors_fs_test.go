package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestClassifyStorageErrors: a driver's missing object, refused request and
// network failure (vfd/s3 reports them as fs.ErrNotExist, fs.ErrPermission
// and a net error) map to ErrNotFound, ErrDenied and ErrIO, each exactly
// one sentinel, cause kept.
func TestClassifyStorageErrors(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		cause, want error
	}{
		{fs.ErrNotExist, ErrNotFound}, {fs.ErrPermission, ErrDenied}, {syscall.EACCES, ErrDenied},
		{netErr, ErrIO},
	} {
		err := classify(fmt.Errorf("s3: get page: %w", c.cause))
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 || !errors.Is(err, c.want) || !errors.Is(err, c.cause) {
			t.Errorf("%v: classified %v (%d sentinels), want %v with its cause", c.cause, err, n, c.want)
		}
	}
}

// TestUnknownFilterIsVersion: an intact file whose dataset names a filter
// this version does not know (a newer scc wrote it) opens, and opening
// that dataset fails with ErrVersion, not ErrCorrupt.
func TestUnknownFilterIsVersion(t *testing.T) {
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil, noCheck("the test gives a dataset a filter id newer than this version"))
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{16}, Chunk: []uint64{4}, Filters: []Filter{Shuffle()}})
	must(t, err)
	must(t, ds.Close(context.Background()))
	must(t, f.Close(context.Background()))

	// What a newer writer would leave: the header names filter 99.
	sb, err := readSuperblock(mem)
	must(t, err)
	cat, parts, err := readCatalogBlock(mem, sb)
	must(t, err)
	hb, err := readBlock(mem, cat[0].HeaderAddr, cat[0].HeaderSize, sb.EOF)
	must(t, err)
	hdr, err := format.DecodeDatasetHeader(hb)
	must(t, err)
	hdr.Filters = []byte{1, 1, 99, 0, 0, 0, 0, 0}
	end := sb.EOF
	put := func(b []byte) uint64 {
		addr := end
		_, err := mem.WriteAt(b, int64(addr))
		must(t, err)
		end += uint64(len(b))
		return addr
	}
	nh := format.EncodeDatasetHeader(hdr)
	cat[0].HeaderAddr, cat[0].HeaderSize, cat[0].HeaderSum = put(nh), uint64(len(nh)), format.Trailer(nh)
	nc := format.EncodeCatalogParts(cat, parts)
	sb.CatalogAddr, sb.CatalogSize, sb.CatalogSum = put(nc), uint64(len(nc)), format.Trailer(nc)
	sb.EOF = end
	_, err = mem.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation))
	must(t, err)

	g, err := Open(context.Background(), "", &Options{Driver: mem, ReadOnly: true})
	must(t, err)
	defer g.Close(context.Background())
	if _, err := g.OpenDataset(context.Background(), "d", nil); !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("dataset with filter 99: %v, want ErrVersion only", err)
	}
}

// readCatalogBlock reads the catalog sb names, with its parts.
func readCatalogBlock(drv vfd.Driver, sb format.Superblock) ([]format.CatalogEntry, format.CatalogParts, error) {
	b, err := readBlock(drv, sb.CatalogAddr, sb.CatalogSize, sb.EOF)
	if err != nil {
		return nil, format.CatalogParts{}, err
	}
	return format.DecodeCatalogParts(b)
}
