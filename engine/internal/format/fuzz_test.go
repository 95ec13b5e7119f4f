package format

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The fuzz targets decode arbitrary bytes. Whatever decodes must re-encode
// to exactly the same bytes when it was a current-version block (encodings
// are canonical) and in every case decode again to the same value; nothing
// may panic. An older-version block re-encodes in the current version
// (sameEncoding). Seeds: valid encodings (f.Add) plus
// the files in testdata/fuzz (see TestWriteSeedCorpus).

func FuzzSuperblock(f *testing.F) {
	for _, s := range superblockSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := DecodeSuperblock(b)
		if err != nil {
			return
		}
		again := EncodeSuperblock(sb)
		if !sameEncoding(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
		sb2, err := DecodeSuperblock(again)
		if err != nil || sb2 != sb {
			t.Fatalf("re-decode: %+v %v, want %+v", sb2, err, sb)
		}
		if sb.Validate() != nil {
			t.Fatal("decoded superblock fails Validate")
		}
	})
}

func FuzzCatalog(f *testing.F) {
	for _, s := range catalogSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, parts, err := DecodeCatalogParts(b)
		if err != nil {
			return
		}
		again := EncodeCatalogParts(c, parts)
		if !sameEncoding(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
		c2, err := DecodeCatalog(again)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-decode: %+v %v, want %+v", c2, err, c)
		}
		if ValidateCatalog(c) != nil {
			t.Fatal("decoded catalog fails ValidateCatalog")
		}
	})
}

func FuzzDatasetHeader(f *testing.F) {
	for _, s := range append(headerSeeds(), typeHeaderSeeds()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeDatasetHeader(b)
		if err != nil {
			return
		}
		again := EncodeDatasetHeader(h)
		if !sameEncoding(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
		h2, err := DecodeDatasetHeader(again)
		if err != nil || !reflect.DeepEqual(h, h2) {
			t.Fatalf("re-decode: %+v %v, want %+v", h2, err, h)
		}
		if h.Validate() != nil {
			t.Fatal("decoded header fails Validate")
		}
		if h.ChunkBytes() > MaxChunkBytes {
			t.Fatalf("chunk of %d bytes decoded", h.ChunkBytes())
		}
	})
}

// FuzzChunkFrame: VerifyChunk never panics and accepts exactly the frames
// AppendChunkChecksum makes.
func FuzzChunkFrame(f *testing.F) {
	f.Add(AppendChunkChecksum([]byte("chunk")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := VerifyChunk(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendChunkChecksum(bytes.Clone(img)), b) {
			t.Fatal("accepted frame is not AppendChunkChecksum of its image")
		}
	})
}

func superblockSeeds() [][]byte {
	s := [][]byte{EncodeSuperblock(sampleSuperblock()), EncodeSuperblock(Superblock{EOF: DataStart})}
	return append(s, reseal(s[0], func(b []byte) { b[4] = 2 }))
}

func catalogSeeds() [][]byte {
	return [][]byte{EncodeCatalog(sampleCatalog()), EncodeCatalog(nil),
		EncodeCatalog([]CatalogEntry{{Name: "a", ID: 1, HeaderAddr: DataStart, HeaderSize: headerMin}}),
		EncodeCatalogParts(sampleCatalog(), CatalogParts{Attrs: []byte{1, 1, 0, 0, 0}})}
}

func headerSeeds() [][]byte {
	var s [][]byte
	for _, h := range sampleHeaders()[:2] { // the third is large; keep seeds small
		s = append(s, EncodeDatasetHeader(h))
	}
	return s
}

// typeHeaderSeeds are headers of the type codes version 3 added, with a
// fill value, and the first of them sealed as v2 (which must not decode).
func typeHeaderSeeds() [][]byte {
	var s [][]byte
	for _, code := range []uint8{TypeBool, TypeComplex64, TypeComplex128} {
		h := DatasetHeader{Name: "t", ID: 7, Type: code, Shape: []uint64{5, 3}, MaxShape: []uint64{Unlimited, 3},
			Chunk: []uint64{2, 3}, Layout: LayoutContiguous, Fill: bytes.Repeat([]byte{1}, ElemSize(code)),
			Attrs: []byte{1, 1, 0, 0, 0}}
		s = append(s, EncodeDatasetHeader(h))
	}
	s = append(s, resealAs(s[0], 2))
	// Version 4's string type: a short fill in the fixed part, a wide
	// fill part, and one sealed as v3 (which must not decode).
	for _, h := range []DatasetHeader{
		{Name: "s", ID: 8, Type: TypeString, StrLen: 5, StrPad: PadSpacePad, StrCharset: CharsetUTF8, Shape: []uint64{3},
			MaxShape: []uint64{3}, Chunk: []uint64{2}, Layout: LayoutSparse, Fill: []byte("ab   ")},
		{Name: "w", ID: 9, Type: TypeString, StrLen: 300, StrPad: PadNullPad, Shape: []uint64{3},
			MaxShape: []uint64{3}, Chunk: []uint64{1}, Layout: LayoutDense, Fill: bytes.Repeat([]byte{'x'}, 300)},
	} {
		s = append(s, EncodeDatasetHeader(h))
	}
	s = append(s, resealAs(s[len(s)-2], 3))
	// Version 6's described types and half floats, and a compound sealed
	// as v5 (which must not decode).
	for _, n := range sampleTypes()[:8] {
		s = append(s, EncodeDatasetHeader(describedHeader(n)))
	}
	s = append(s, EncodeDatasetHeader(DatasetHeader{Name: "h", ID: 5, Type: TypeFloat16, Shape: []uint64{6}, MaxShape: []uint64{6},
		Chunk: []uint64{3}, Layout: LayoutDense, Fill: []byte{0, 0x3c}}))
	return append(s, resealAs(s[len(s)-3], 5))
}

// TestWriteSeedCorpus rewrites testdata/fuzz from the seeds above when
// SCC_WRITE_CORPUS=1; otherwise it checks that the checked-in corpus files
// exist, so a deleted corpus is noticed.
func TestWriteSeedCorpus(t *testing.T) {
	sets := map[string][][]byte{
		"FuzzSuperblock":    superblockSeeds(),
		"FuzzCatalog":       catalogSeeds(),
		"FuzzCatalogGroups": groupSeeds(),
		"FuzzDatasetHeader": headerSeeds(),
		// Described types: every class, nested, and damage.
		"FuzzTypeDescription": typeSeeds(),
	}
	for target, seeds := range sets {
		dir := filepath.Join("testdata", "fuzz", target)
		if os.Getenv("SCC_WRITE_CORPUS") != "1" {
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) < len(seeds) {
				t.Fatalf("%s: seed corpus missing (%v); run with SCC_WRITE_CORPUS=1", dir, err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sameEncoding reports whether again, the re-encoding of the decoded block
// in, is what the encoder must produce: in itself for a block of the current
// version; for an older block, whose re-encoding is in the current version,
// only the decoded value is compared (by the callers).
func sameEncoding(again, in []byte) bool {
	if len(in) > 4 && in[4] != Version {
		return len(again) > 4 && again[4] == Version
	}
	return bytes.Equal(again, in)
}
