//go:build cgo

package filter

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamAll decodes image with DecodeVerifiedStream through a piece buffer
// of the given size and returns the pieces end to end, checking that they
// come in order and never past n.
func streamAll(t testing.TB, p *Pipeline, image []byte, mask uint32, n, piece int) ([]byte, error) {
	t.Helper()
	var out []byte
	err := p.DecodeVerifiedStream(image, mask, n, make([]byte, piece), func(off int, b []byte) {
		require.Equal(t, len(out), off, "pieces out of order")
		require.LessOrEqual(t, off+len(b), n, "a piece past the chunk")
		require.LessOrEqual(t, len(b), piece)
		out = append(out, b...)
	})
	return out, err
}

// A zstd chunk streams to the bytes DecodeVerifiedTo gives, whatever the
// piece size (with CRC32C applied too, it does not stream).
func TestDecodeVerifiedStream(t *testing.T) {
	src := zarrBenchChunkAt(1, 2, 3)[:3<<20+17]
	for _, specs := range [][]Spec{{{ID: Zstd, Level: 3}}, {{ID: Zstd, Level: 1}}, {{ID: Zstd, Level: 3}, {ID: CRC32C}}} {
		p := mustPipeline(t, specs, 2)
		for _, in := range [][]byte{src, textData(5000), nil} {
			image, mask, err := p.Encode(in)
			require.NoError(t, err)
			if !p.StreamsVerified(image, mask) {
				require.True(t, len(specs) > 1 || mask != 0, "a lone zstd frame of %d bytes did not stream", len(in))
				continue
			}
			want, err := p.DecodeVerifiedTo(nil, image, mask, len(in))
			require.NoError(t, err)
			for _, piece := range []int{1, 1000, 128 << 10, 4 << 20} {
				got, err := streamAll(t, p, image, mask, len(in), piece)
				require.NoError(t, err, "%v, piece %d", specs, piece)
				assert.True(t, bytes.Equal(want, got), "%v, %d bytes, piece %d", specs, len(in), piece)
			}
		}
	}
}

// What does not stream is refused up front: other filters applied, zstd
// skipped, a window over 8 MiB (a single-segment frame's window is its
// whole content); frames of either encoder within it stream.
func TestDecodeVerifiedStreamRefuses(t *testing.T) {
	src := zarrBenchChunkAt(0, 1, 2)[:1<<20]
	shuffled := mustPipeline(t, []Spec{{ID: Shuffle}, {ID: Zstd, Level: 3}}, 2)
	image, mask, err := shuffled.Encode(src)
	require.NoError(t, err)
	assert.False(t, shuffled.StreamsVerified(image, mask), "shuffle then zstd")

	p := mustPipeline(t, []Spec{{ID: Zstd, Level: 3}}, 2)
	for _, c := range []struct {
		window  int
		single  bool
		streams bool
	}{{2 << 20, false, true}, {0, true, true}} {
		opts := []zstd.EOption{zstd.WithSingleSegment(c.single)}
		if c.window > 0 {
			opts = append(opts, zstd.WithWindowSize(c.window))
		}
		w, err := zstd.NewWriter(nil, opts...)
		require.NoError(t, err)
		frame := w.EncodeAll(src, nil)
		assert.Equal(t, c.streams, p.StreamsVerified(frame, 0), "pure-Go frame, window %d, single segment %v", c.window, c.single)
		got, err := streamAll(t, p, frame, 0, len(src), 1<<10)
		if c.streams {
			require.NoError(t, err)
			assert.True(t, bytes.Equal(src, got))
		} else {
			assert.True(t, errors.Is(err, ErrInvalid), "%v", err)
		}
	}
	huge := append(bytes.Clone(src), zarrBenchChunkAt(0, 1, 3)[:8<<20]...)
	w, err := zstd.NewWriter(nil, zstd.WithSingleSegment(true), zstd.WithEncoderLevel(zstd.SpeedFastest))
	require.NoError(t, err)
	assert.False(t, p.StreamsVerified(w.EncodeAll(huge, nil), 0), "single segment of 9 MiB")

	image, mask, err = p.Encode(src)
	require.NoError(t, err)
	require.True(t, p.StreamsVerified(image, mask))
	assert.False(t, p.StreamsVerified(image, 1), "zstd skipped by the mask")
	_, err = streamAll(t, p, image, mask, len(src), 0)
	assert.True(t, errors.Is(err, ErrInvalid), "no piece buffer: %v", err)
}

// A frame that lies about its size, is cut short or is damaged fails with
// ErrCorrupt, never emitting past the chunk.
func TestDecodeVerifiedStreamCorrupt(t *testing.T) {
	src := zarrBenchChunkAt(2, 1, 0)[:1<<20]
	p := mustPipeline(t, []Spec{{ID: Zstd, Level: 3}}, 2)
	image, mask, err := p.Encode(src)
	require.NoError(t, err)
	_, err = streamAll(t, p, image, mask, len(src)-1, 64<<10)
	assert.True(t, errors.Is(err, ErrCorrupt), "claim of one byte more: %v", err)
	_, err = streamAll(t, p, image[:len(image)-10], mask, len(src), 64<<10)
	assert.True(t, errors.Is(err, ErrCorrupt), "truncated: %v", err)
	for i := 0; i < 200; i++ {
		bad := bytes.Clone(image)
		bad[20+i*len(bad)/250] ^= 0x5a
		got, err := streamAll(t, p, bad, mask, len(src), 64<<10)
		if err != nil {
			assert.True(t, errors.Is(err, ErrCorrupt), "damage at %d: %v", i, err)
			continue
		}
		// Damage libzstd does not notice (without the frame's checksum)
		// still decodes to exactly the chunk's size.
		assert.Len(t, got, len(src))
	}
}

// FuzzDecodeVerifiedStream: a streamed decode of any bytes either fails
// with ErrCorrupt or ErrInvalid, or yields exactly what DecodeVerifiedTo
// yields, and never emits past the size asked for.
func FuzzDecodeVerifiedStream(f *testing.F) {
	p := mustPipeline(f, []Spec{{ID: Zstd, Level: 3}}, 1)
	for _, src := range [][]byte{detectorData(3000), textData(1000), randomData(300, 1), textData(200 << 10), nil, {7}} {
		image, _, err := p.Encode(src)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(image, uint32(len(src)), uint16(1000))
		f.Add(image, uint32(len(src)+1), uint16(1))
	}
	f.Fuzz(func(t *testing.T, image []byte, size uint32, piece uint16) {
		n := int(size % (fuzzMaxSize + 1))
		got, err := streamAll(t, p, image, 0, n, int(piece)+1)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v wraps neither ErrCorrupt nor ErrInvalid", err)
			}
			return
		}
		want, werr := p.DecodeVerifiedTo(nil, image, 0, n)
		if werr != nil || !bytes.Equal(want, got) {
			t.Fatalf("streamed %d bytes, whole decode %v", len(got), werr)
		}
	})
}
