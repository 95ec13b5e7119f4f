package alloc

import (
	"encoding/binary"
	"errors"
	"testing"
)

// encodeExtents is the fuzzers' input: an EOF, then extents, each
// little-endian uint64s.
func encodeExtents(eof int64, ext ...Extent) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(eof))
	for _, e := range ext {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Off))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Size))
	}
	return b
}

// decodeExtents reads encodeExtents's form (at most 64 extents) and the
// sum of their sizes; ok is false when b is too short for an EOF.
func decodeExtents(b []byte) (eof int64, ext []Extent, total int64, ok bool) {
	if len(b) < 8 {
		return 0, nil, 0, false
	}
	eof = int64(binary.LittleEndian.Uint64(b))
	for b = b[8:]; len(b) >= 16 && len(ext) < 64; b = b[16:] {
		e := Extent{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))}
		ext = append(ext, e)
		total += e.Size
	}
	return eof, ext, total, true
}

func addExtentSeeds(f *testing.F) {
	f.Add(encodeExtents(ds+100, Extent{ds, 10}, Extent{ds + 10, 5}, Extent{ds + 50, 50}))
	f.Add(encodeExtents(ds+100, Extent{ds, 10}, Extent{ds + 5, 10}))
	f.Add(encodeExtents(ds, Extent{ds, 1}))
}

// FuzzRebuild: the live extents come from on-disk metadata, so Rebuild gets
// arbitrary ones. It must never panic; on success the allocator passes
// Check and its free extents plus the live ones tile [dataStart, eof)
// exactly; on failure the error is one of the documented sentinels.
func FuzzRebuild(f *testing.F) {
	addExtentSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		eof, live, liveBytes, ok := decodeExtents(b)
		if !ok {
			return
		}
		a, err := Rebuild(ds, eof, live)
		if err != nil {
			if !errors.Is(err, ErrOverlap) && !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		if err := a.Check(); err != nil {
			t.Fatal(err)
		}
		var free int64
		for _, e := range a.FreeExtents() {
			free += e.Size
		}
		if free+liveBytes != eof-ds {
			t.Fatalf("free %d + live %d != %d", free, liveBytes, eof-ds)
		}
		// The allocator must not hand out live space.
		off, err := a.Alloc(1)
		if err != nil {
			return // ErrNoSpace near 2^63
		}
		for _, e := range live {
			if off >= e.Off && off < e.End() {
				t.Fatalf("allocated %d inside live %v", off, e)
			}
		}
	})
}
