package cache

import (
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// Split loads (for h5perf's partial-chunk reads). A read of part of a
// chunk that is not resident loads the chunk through the cache: a pread of
// its stored image, then Decode checksums the image, all on the caller's
// core, before the piece is copied out. For a large unfiltered chunk that
// pread and checksum are most of the read. So the images of a load are
// read as a split direct read is (splitread.go): when the load is at least
// Config.SplitReadBytes and a helper is idle, the extents are cut into
// shares that helpers read while the caller reads the first, each
// goroutine checksums the bytes it read, and the caller combines the sums
// in byte order. A layout that is a SummedDecoder then decodes the image
// with that sum (DecodeSummed) instead of summing it again; any other
// image is read in the same vector read and decoded by Decode as before.
//
// Gating, helpers, error handling and coherence are the split direct
// read's: the split only decides which goroutine reads which bytes of the
// same extents into the same buffers; a helper's I/O error fails the load
// as the caller's own would; a damaged byte in any share fails the sum and
// the decode reports corruption. The load's entries are loading
// throughout, so nobody else sees the buffers until the decode is done.

// readImages reads the images of loads (all of file f; exts[i] is
// loads[i]'s) with one vector read, split among helpers when want
// says so. When it splits, it returns per load the checksum state of its
// summable prefix (directRead.summer, sum and summed; a zero directRead
// for images Decode verifies itself); otherwise nil.
func (s *splitState) readImages(f *File, loads []*group, exts []vfd.Extent) ([]directRead, error) {
	var total int64
	for _, x := range exts {
		total += int64(len(x.Buf))
	}
	if s.want(total) == 0 {
		return nil, f.readV(exts) // the common case: nothing allocated
	}
	ds := make([]directRead, len(loads))
	cut := make([]vfd.Extent, 0, 2*len(exts))
	tags := make([]int32, 0, 2*len(exts))
	for i, g := range loads {
		x := exts[i]
		sd, ok := g.d.lay().l.(layout.SummedDecoder)
		n := int64(-1)
		if ok {
			n = sd.SummedLen(g.loc)
		}
		if n < 0 || n > int64(len(x.Buf)) {
			cut, tags = append(cut, x), append(tags, -1)
			continue
		}
		// The summed prefix is an extent of its own, so that its pieces
		// (and only they) are summed; the rest (the trailer) follows.
		ds[i] = directRead{g: g, summer: sd}
		cut, tags = append(cut, vfd.Extent{Off: x.Off, Buf: x.Buf[:n:n]}), append(tags, int32(i))
		if n < int64(len(x.Buf)) {
			cut, tags = append(cut, vfd.Extent{Off: x.Off + n, Buf: x.Buf[n:]}), append(tags, -1)
		}
	}
	if err := s.read(f, cut, tags, ds); err != nil {
		return nil, err
	}
	return ds, nil
}

// sumOf returns load i's split-read state, or nil when the load was not
// split.
func sumOf(sums []directRead, i int) *directRead {
	if sums == nil {
		return nil
	}
	return &sums[i]
}
