package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// What an open that finds no scc file says about what it found instead, so
// that the user learns what to do (import an HDF5 file, point at the right
// path) rather than that some checksum failed.

// hdf5Signature is the HDF5 superblock signature; a file with a user block
// has it at 512, 1024, 2048, ... instead of 0.
var hdf5Signature = []byte("\x89HDF\r\n\x1a\n")

// describeUnopenable returns what drv holds when it does not open as an
// scc file (the open failed with ErrCorrupt), or "" when it looks like a
// damaged scc file, for which the failure's own text says what is damaged.
func describeUnopenable(drv vfd.Driver) string {
	size, err := drv.Size()
	if err != nil {
		return ""
	}
	if size == 0 {
		return "empty file (0 bytes): not an scc file"
	}
	at := func(off int64, n int) []byte {
		if off+int64(n) > size {
			return nil
		}
		b := make([]byte, n)
		if _, err := drv.ReadAt(b, off); err != nil {
			return nil
		}
		return b
	}
	for off := int64(0); off+int64(len(hdf5Signature)) <= size; off = max(2*off, 512) {
		if bytes.Equal(at(off, len(hdf5Signature)), hdf5Signature) {
			return "not an scc file (looks like HDF5: use scctl import)"
		}
	}
	head := at(0, 4)
	switch {
	case bytes.Equal(head, []byte("PK\x03\x04")), bytes.Equal(head, []byte("PK\x05\x06")):
		return "not an scc file (looks like a zip archive; a zipped Zarr store is imported unzipped, with scctl import)"
	case bytes.Equal(head, []byte("CDF\x01")), bytes.Equal(head, []byte("CDF\x02")):
		return "not an scc file (looks like netCDF-3, which scc does not read)"
	}
	// An scc file: the superblocks' magic where they belong. The end of
	// file a valid one names is the least the file must hold.
	need, scc := int64(format.DataStart), false
	for _, off := range []int64{format.SlotA, format.SlotB} {
		b := at(off, format.SlotSize)
		if b == nil {
			if m := at(off, 4); m != nil && bytes.Equal(m, []byte("SCCF")) {
				scc = true
			}
			continue
		}
		st := format.InspectSlot(b, off)
		scc = scc || st.GenLegible
		if st.Valid && int64(st.EOF) > need { // a valid slot's EOF is below 2^63
			need = int64(st.EOF)
		}
	}
	switch {
	case scc && size < need:
		return fmt.Sprintf("truncated: %d bytes, at least %d expected", size, need)
	case !scc && size < format.DataStart:
		return fmt.Sprintf("not an scc file (%d bytes, no scc superblock)", size)
	case !scc:
		return "not an scc file (no scc superblock in either slot; if it was one, both superblocks are destroyed)"
	}
	return ""
}

// describeDir says what a directory passed to Open is, when it is
// something scc can import.
func describeDir(path string) string {
	for _, n := range []string{".zgroup", ".zarray", "zarr.json"} {
		if fi, err := os.Stat(filepath.Join(path, n)); err == nil && fi.Mode().IsRegular() {
			return "not an scc file (looks like a Zarr store: use scctl import)"
		}
	}
	return ""
}

// openFailed is the error of an open of drv that failed with err: when the
// file is no scc file at all, or is cut short, the text says so first.
// The class stays the failure's (ErrCorrupt).
func openFailed(drv vfd.Driver, err error) error {
	if !errors.Is(err, ErrCorrupt) {
		return err
	}
	what := describeUnopenable(drv)
	if what == "" {
		return err
	}
	// What failed (a slot's checksum, a short read of the catalog) says
	// less than what the file is: the chain keeps it, the text does not.
	return &classError{msg: ErrCorrupt.Error() + ": " + what, errs: [2]error{ErrCorrupt, err}}
}
