package alloc

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzRebuild: the live extents come from on-disk metadata, so Rebuild gets
// arbitrary ones. It must never panic; on success the allocator passes
// Check and its free extents plus the live ones tile [dataStart, eof)
// exactly; on failure the error is one of the documented sentinels.
func FuzzRebuild(f *testing.F) {
	enc := func(eof int64, ext ...Extent) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(eof))
		for _, e := range ext {
			b = binary.LittleEndian.AppendUint64(b, uint64(e.Off))
			b = binary.LittleEndian.AppendUint64(b, uint64(e.Size))
		}
		return b
	}
	f.Add(enc(ds+100, Extent{ds, 10}, Extent{ds + 10, 5}, Extent{ds + 50, 50}))
	f.Add(enc(ds+100, Extent{ds, 10}, Extent{ds + 5, 10}))
	f.Add(enc(ds, Extent{ds, 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 8 {
			return
		}
		eof := int64(binary.LittleEndian.Uint64(b))
		var live []Extent
		var liveBytes int64
		for b = b[8:]; len(b) >= 16 && len(live) < 64; b = b[16:] {
			e := Extent{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))}
			live = append(live, e)
			liveBytes += e.Size
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
