package filter

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// oldZstdEncoder encodes as the first zstd filter did (ID 3): its preset
// levels 1..4 were the encoder's four speeds, and frames kept zstd's
// checksum.
func oldZstdEncoder(t *testing.T, preset int) *zstd.Encoder {
	t.Helper()
	speeds := [...]zstd.EncoderLevel{1: zstd.SpeedFastest, 2: zstd.SpeedDefault, 3: zstd.SpeedBetterCompression, 4: zstd.SpeedBestCompression}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(speeds[preset]), zstd.WithWindowSize(zstdWindow),
		zstd.WithLowerEncoderMem(true), zstd.WithSingleSegment(true), zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// A pipeline stored by the first zstd filter (ID 3, preset level) still
// decodes, its level now reads as the zstd level that selects the speed it
// was written with, and its chunks (which carry a frame checksum) decode.
func TestZstdPresetFilesKeepReading(t *testing.T) {
	src := detectorData(300 << 10)
	for preset, want := range map[int32]zstd.EncoderLevel{1: zstd.SpeedFastest, 2: zstd.SpeedDefault, 3: zstd.SpeedBetterCompression, 4: zstd.SpeedBestCompression} {
		stored := []byte{1, 2, 1, 0, 0, 0, 0, 0, 3, 0, byte(preset), 0, 0, 0}
		specs, err := DecodeSpecs(stored)
		if err != nil {
			t.Fatalf("preset %d: %v", preset, err)
		}
		if specs[1].ID != Zstd || zstd.EncoderLevelFromZstd(int(specs[1].Level)) != want {
			t.Fatalf("preset %d read as %v (speed %v), want speed %v", preset, specs[1], zstd.EncoderLevelFromZstd(int(specs[1].Level)), want)
		}
		p, err := NewPipeline(specs, 2)
		if err != nil {
			t.Fatal(err)
		}
		if c := p.codecs[1].(zstdCodec); c.speed != want {
			t.Fatalf("preset %d encodes at %v, want %v", preset, c.speed, want)
		}
		shuffled := make([]byte, len(src))
		shuffle(shuffled, src, 2)
		image := oldZstdEncoder(t, int(preset)).EncodeAll(shuffled, nil)
		if h := frameHeader(t, image); !h.HasCheckSum {
			t.Fatal("the old-format frame has no checksum: the test encodes wrongly")
		}
		for name, dec := range map[string]func() ([]byte, error){
			"DecodeTo":         func() ([]byte, error) { return p.DecodeTo(nil, image, 0, len(src)) },
			"DecodeVerifiedTo": func() ([]byte, error) { return p.DecodeVerifiedTo(make([]byte, len(src)), image, 0, len(src)) },
		} {
			got, err := dec()
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("preset %d %s: equal %v, err %v", preset, name, bytes.Equal(got, src), err)
			}
		}
	}
}

func frameHeader(t *testing.T, frame []byte) zstd.Header {
	t.Helper()
	var h zstd.Header
	if err := h.Decode(frame); err != nil {
		t.Fatal(err)
	}
	return h
}

// Zstd levels are zstd's: libzstd takes them as they are, and the pure-Go
// encoder maps 3 (and 0, the default) to SpeedDefault; the frames are byte
// for byte what the build's library writes at that level.
func TestZstdLevelsAreZstds(t *testing.T) {
	for level, want := range map[int32]zstd.EncoderLevel{
		ZstdMinLevel: zstd.SpeedFastest, -5: zstd.SpeedFastest, 1: zstd.SpeedFastest, 2: zstd.SpeedFastest,
		0: zstd.SpeedDefault, 3: zstd.SpeedDefault, 5: zstd.SpeedDefault,
		6: zstd.SpeedBetterCompression, 9: zstd.SpeedBetterCompression,
		10: zstd.SpeedBestCompression, 22: zstd.SpeedBestCompression,
	} {
		p, err := NewPipeline([]Spec{{ID: Zstd, Level: level}}, 1)
		if err != nil {
			t.Fatalf("level %d: %v", level, err)
		}
		wantLevel := int(level)
		if level == 0 {
			wantLevel = ZstdDefaultLevel
		}
		if c := p.codecs[0].(zstdCodec); c.speed != want || c.level != wantLevel {
			t.Fatalf("level %d encodes at %v, level %d, want %v, %d", level, c.speed, c.level, want, wantLevel)
		}
	}
	if got := (Spec{ID: Zstd}).normalize(); got.Level != 3 {
		t.Fatalf("level 0 stored as %d, want 3", got.Level)
	}

	src := textData(200 << 10)
	p := mustPipeline(t, []Spec{{ID: Zstd, Level: 3}}, 1)
	image, mask, err := p.Encode(src)
	if err != nil || mask != 0 {
		t.Fatal(mask, err)
	}
	if want := zstdReferenceFrame(t, src, 3); !bytes.Equal(image, want) {
		t.Fatalf("Zstd(3) frame of %d bytes differs from %s's own level 3 frame of %d", len(image), ZstdCodec, len(want))
	}

	for _, level := range []int32{23, 100, ZstdMinLevel - 1} {
		if _, err := NewPipeline([]Spec{{ID: Zstd, Level: level}}, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("level %d: %v, want ErrInvalid", level, err)
		}
	}
}

// New frames record their content size (numcodecs sizes its output by it)
// and carry no checksum (the chunk frame's CRC32C covers the stored bytes).
func TestZstdFramesHaveSizeNoChecksum(t *testing.T) {
	for _, n := range []int{100, 64 << 10, 300 << 10} {
		p := mustPipeline(t, []Spec{shuf, {ID: Zstd, Level: 1}}, 2)
		image, mask, err := p.Encode(detectorData(n))
		if err != nil || mask != 0 {
			t.Fatal(mask, err)
		}
		h := frameHeader(t, image)
		if !h.HasFCS || h.FrameContentSize != uint64(n) || h.HasCheckSum {
			t.Fatalf("%d bytes: content size %v/%d, checksum %v", n, h.HasFCS, h.FrameContentSize, h.HasCheckSum)
		}
	}
}

// A frame checksum is verified by DecodeTo (the bytes may come from
// anywhere) and skipped by DecodeVerifiedTo (the caller verified a checksum
// over the stored bytes). A damaged checksum trailer is what tells them
// apart: only the checking decode sees it.
func TestZstdChecksumOnlyWhenUnverified(t *testing.T) {
	src := detectorData(200 << 10)
	p := mustPipeline(t, []Spec{{ID: Zstd, Level: 1}}, 2)
	image := oldZstdEncoder(t, 1).EncodeAll(src, nil)
	image[len(image)-1] ^= 0x40 // the frame checksum's last byte
	if _, err := p.DecodeTo(nil, image, 0, len(src)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeTo of a frame with a bad checksum: %v, want ErrCorrupt", err)
	}
	got, err := p.DecodeVerifiedTo(nil, image, 0, len(src))
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("DecodeVerifiedTo: equal %v, err %v", bytes.Equal(got, src), err)
	}
}
