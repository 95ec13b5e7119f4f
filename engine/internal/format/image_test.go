package format

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func block(n int, seed byte) []byte {
	b := make([]byte, n-crcSize)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return sealFrame(b)
}

func sampleImage() Image {
	return Image{
		Generation: 9,
		FileID:     [16]byte{1, 2, 3},
		CatalogSum: 0xdeadbeef,
		Sizing:     []byte{1, 2, 3, 4},
		Entries: []ImageEntry{
			{Kind: ImageCatalog, Rank: 0, Addr: DataStart, Data: block(16, 1)},
			{Kind: ImageHeader, Rank: 1, Addr: DataStart + 100, Data: block(90, 2)},
			{Kind: ImageIndex, Age: 3, Rank: 2, Addr: DataStart + 1000, Data: block(64, 3)},
			{Kind: ImageChunk, Age: 255, Rank: 7, Addr: 1 << 40, Data: block(4, 4)},
		},
	}
}

// TestImageRoundTrip: every field survives, the size is what ImageSize
// says, and the encoding is canonical (Cache image RFC §6 items 2D, 2E, 3, 4A).
func TestImageRoundTrip(t *testing.T) {
	withFree := sampleImage()
	withFree.HasFree, withFree.Free = true, []FreeExtent{{DataStart + 16, 84}, {DataStart + 190, 10}, {1 << 41, 1}}
	for _, img := range []Image{sampleImage(), {Generation: 1}, {Generation: 2, Sizing: []byte{9}}, withFree, {Generation: 3, HasFree: true, Free: []FreeExtent{}}} {
		if err := ValidateImage(img); err != nil {
			t.Fatal(err)
		}
		b := EncodeImage(img)
		if int64(len(b)) != ImageSize(img) {
			t.Fatalf("encoded %d bytes, ImageSize says %d", len(b), ImageSize(img))
		}
		got, err := DecodeImage(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(img.Entries) == 0 {
			img.Entries = []ImageEntry{}
		}
		if !reflect.DeepEqual(got, img) {
			t.Fatalf("decoded %+v, want %+v", got, img)
		}
		if !bytes.Equal(EncodeImage(got), b) {
			t.Fatal("re-encoding differs")
		}
	}
}

// TestImageLayout pins the offsets FORMAT.md §20 documents.
func TestImageLayout(t *testing.T) {
	img := sampleImage()
	b := EncodeImage(img)
	if string(b[:4]) != "SCCI" || b[4] != 2 || b[5] != 1 {
		t.Fatalf("frame %x", b[:8])
	}
	if le.Uint64(b[8:]) != 9 || b[16] != 1 || le.Uint32(b[32:]) != 0xdeadbeef || le.Uint32(b[36:]) != 4 || le.Uint32(b[40:]) != 4 {
		t.Fatalf("fixed fields %x", b[:48])
	}
	d := b[imageFixed+4+2*imageEntry:] // third descriptor
	if d[0] != ImageIndex || d[1] != 3 || le.Uint32(d[4:]) != 2 || le.Uint64(d[8:]) != DataStart+1000 || le.Uint32(d[16:]) != 64 || le.Uint32(d[20:]) != img.Entries[2].Sum() {
		t.Fatalf("descriptor %x", d[:imageEntry])
	}
	data := imageFixed + 4 + 4*imageEntry
	if !bytes.Equal(b[data:data+16], img.Entries[0].Data) {
		t.Fatal("first entry's data not right after the descriptors")
	}
}

// TestImageCorrupt: damaged or inconsistent images are ErrCorrupt, never a
// panic; an intact image of a newer version is ErrVersion.
func TestImageCorrupt(t *testing.T) {
	good := EncodeImage(sampleImage())
	first := imageFixed + 4
	cases := map[string][]byte{
		"short":             good[:imageMin-1],
		"bit flip":          func() []byte { b := bytes.Clone(good); b[60] ^= 1; return b }(),
		"bad magic":         reseal(good, func(b []byte) { b[0] = 'X' }),
		"v1 image":          reseal(good, func(b []byte) { b[4] = 1 }),
		"reserved flag":     reseal(good, func(b []byte) { b[5] |= 4 }),
		"free count":        reseal(good, func(b []byte) { b[5] |= 2; le.PutUint32(b[44:], 1<<30) }),
		"free order":        freeImage(t, func(b []byte) { le.PutUint64(b[imageFixed+4+16:], DataStart) }),
		"free overlap":      freeImage(t, func(b []byte) { le.PutUint64(b[imageFixed+4+8:], 200) }),
		"free empty":        freeImage(t, func(b []byte) { le.PutUint64(b[imageFixed+4+8:], 0) }),
		"free below data":   freeImage(t, func(b []byte) { le.PutUint64(b[imageFixed+4:], 8) }),
		"reserved byte":     reseal(good, func(b []byte) { b[44] = 1 }),
		"sizing no flag":    reseal(good, func(b []byte) { b[5] = 0 }),
		"sizing too long":   reseal(good, func(b []byte) { le.PutUint32(b[40:], 1<<30) }),
		"count too large":   reseal(good, func(b []byte) { le.PutUint32(b[36:], 1<<31) }),
		"entry too long":    reseal(good, func(b []byte) { le.PutUint32(b[first+16:], 1<<31) }),
		"entry sum":         reseal(good, func(b []byte) { b[first+20] ^= 1 }),
		"kind 0":            reseal(good, func(b []byte) { b[first] = 0 }),
		"kind 5":            reseal(good, func(b []byte) { b[first] = 5 }),
		"entry reserved":    reseal(good, func(b []byte) { b[first+2] = 1 }),
		"addr below data":   reseal(good, func(b []byte) { le.PutUint64(b[first+8:], 100) }),
		"address order":     reseal(good, func(b []byte) { le.PutUint64(b[first+imageEntry+8:], DataStart-1+DataStart) }),
		"overlap":           reseal(good, func(b []byte) { le.PutUint64(b[first+imageEntry+8:], DataStart+8) }),
		"trailing bytes":    reseal(append(bytes.Clone(good), 0, 0, 0, 0), func([]byte) {}),
		"entry below crc":   reseal(EncodeImage(Image{Entries: []ImageEntry{{Kind: 1, Addr: DataStart, Data: []byte{0, 0, 0, 0}}}}), func(b []byte) { le.PutUint32(b[imageFixed+16:], 3) }),
		"huge address":      reseal(good, func(b []byte) { le.PutUint64(b[first+3*imageEntry+8:], 1<<63-2) }),
		"count past sizing": reseal(good, func(b []byte) { le.PutUint32(b[36:], 5) }),
	}
	for name, b := range cases {
		if _, err := DecodeImage(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := DecodeImage(reseal(good, func(b []byte) { b[4] = Version + 1 })); !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Errorf("newer version: %v, want ErrVersion only", err)
	}
}

// freeImage is sampleImage with a two-extent free map, changed by mut and
// resealed.
func freeImage(t testing.TB, mut func([]byte)) []byte {
	img := sampleImage()
	img.HasFree, img.Free = true, []FreeExtent{{DataStart + 16, 84}, {DataStart + 190, 10}}
	if err := ValidateImage(img); err != nil {
		t.Fatal(err)
	}
	return reseal(EncodeImage(img), mut)
}

func TestImageValidate(t *testing.T) {
	bad := map[string]func(*Image){
		"address order": func(i *Image) { i.Entries[1].Addr = DataStart + 2000 },
		"kind":          func(i *Image) { i.Entries[0].Kind = 9 },
		"short data":    func(i *Image) { i.Entries[0].Data = []byte{1} },
		"addr":          func(i *Image) { i.Entries[0].Addr = 0 },
		"overlap":       func(i *Image) { i.Entries[1].Addr = DataStart + 1 },
		"sizing":        func(i *Image) { i.Sizing = make([]byte, MaxImageSizing+1) },
		"free no flag":  func(i *Image) { i.Free = []FreeExtent{{DataStart, 1}} },
		"free order":    func(i *Image) { i.HasFree, i.Free = true, []FreeExtent{{DataStart + 10, 1}, {DataStart, 1}} },
		"free empty":    func(i *Image) { i.HasFree, i.Free = true, []FreeExtent{{DataStart, 0}} },
		"free low":      func(i *Image) { i.HasFree, i.Free = true, []FreeExtent{{1, 1}} },
	}
	for name, mut := range bad {
		img := sampleImage()
		mut(&img)
		if err := ValidateImage(img); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestSuperblockImageRecord: the record round-trips in a v2 superblock, is
// checked against EOF, and is a v2-only construct: the same bytes in a
// version-1 superblock are reserved bytes, so that superblock is corrupt,
// and every superblock EncodeSuperblock writes (with or without an image)
// carries version ImageVersion or later, which a reader that knows only
// version 1 refuses with ErrVersion (Cache image RFC §6 item 1D).
func TestSuperblockImageRecord(t *testing.T) {
	sb := sampleSuperblock()
	sb.Image = ImageRecord{Addr: DataStart + 4096, Size: 1000, Sum: 0xabcd}
	b := EncodeSuperblock(sb)
	if le.Uint64(b[68:]) != sb.Image.Addr || le.Uint64(b[76:]) != 1000 || le.Uint32(b[84:]) != 0xabcd {
		t.Fatalf("record bytes %x", b[68:88])
	}
	got, err := DecodeSuperblock(b)
	if err != nil || got != sb {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if b[4] < ImageVersion || ImageVersion < 2 {
		t.Fatalf("superblock with an image written as version %d", b[4])
	}
	if _, err := DecodeSuperblock(reseal(b, func(b []byte) { b[4] = 1 })); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v1 superblock with an image record: %v, want ErrCorrupt", err)
	}
	// A reader of version 1 only: openFrame's version check with Version 1
	// is exactly what such a reader runs; it must say ErrVersion.
	if v := b[4]; v <= 1 {
		t.Fatalf("version %d would be misread by a v1 reader", v)
	}
	for name, r := range map[string]ImageRecord{
		"addr no size":  {Addr: DataStart},
		"sum no size":   {Sum: 1},
		"below data":    {Addr: 100, Size: 100},
		"beyond eof":    {Addr: sb.EOF - 10, Size: 100},
		"too small":     {Addr: DataStart, Size: imageMin - 1},
		"past the max":  {Addr: DataStart, Size: MaxImageBytes + 1},
		"wraps":         {Addr: 1<<64 - 10, Size: 100},
		"reserved tail": {},
	} {
		s := sampleSuperblock()
		s.Image = r
		enc := EncodeSuperblock(s)
		if name == "reserved tail" {
			enc = reseal(enc, func(b []byte) { b[sbUsed] = 1 })
		}
		if _, err := DecodeSuperblock(enc); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		if name != "reserved tail" && s.Validate() == nil {
			t.Errorf("%s: Validate accepts it", name)
		}
	}
}

func FuzzImage(f *testing.F) {
	f.Add(EncodeImage(sampleImage()))
	f.Add(EncodeImage(Image{Generation: 1}))
	f.Add(freeImage(f, func([]byte) {}))
	f.Add(EncodeImage(Image{Generation: 3, Entries: []ImageEntry{{Kind: ImageChunk, Addr: DataStart, Data: block(8, 0)}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := DecodeImage(b)
		if err != nil {
			return
		}
		// Bounded: the entry list never outgrows the block.
		if int64(len(img.Entries))*(imageEntry+crcSize) > int64(len(b)) {
			t.Fatalf("%d entries from %d bytes", len(img.Entries), len(b))
		}
		if int64(len(img.Free))*imageFree > int64(len(b)) {
			t.Fatalf("%d free extents from %d bytes", len(img.Free), len(b))
		}
		if ValidateImage(img) != nil {
			t.Fatal("decoded image fails ValidateImage")
		}
		again := EncodeImage(img)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}
