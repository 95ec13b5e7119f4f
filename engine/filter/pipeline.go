package filter

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxChunkSize bounds the decoded size of a chunk (and so every buffer the
// pipeline allocates). It leaves room for the CRC trailers so size
// arithmetic cannot overflow.
const MaxChunkSize = math.MaxInt - crcLen*MaxFilters

// MaxElemSize bounds the element size given to NewPipeline.
const MaxElemSize = 1 << 20

// Pipeline encodes chunk images for disk and decodes them back. It is
// immutable and safe for concurrent use by any number of goroutines.
type Pipeline struct {
	specs    []Spec // normalised; len <= MaxFilters
	codecs   []codec
	elemSize int
}

// NewPipeline builds a pipeline applying specs in order to chunks of
// elements of elemSize bytes (used by Shuffle). An empty list is allowed and
// copies bytes through. Errors wrap ErrInvalid.
func NewPipeline(specs []Spec, elemSize int) (*Pipeline, error) {
	if len(specs) > MaxFilters {
		return nil, fmt.Errorf("%w: %d filters, at most %d allowed", ErrInvalid, len(specs), MaxFilters)
	}
	if elemSize < 1 || elemSize > MaxElemSize {
		return nil, fmt.Errorf("%w: element size %d not in [1, %d]", ErrInvalid, elemSize, MaxElemSize)
	}
	p := &Pipeline{
		specs:    make([]Spec, len(specs)),
		codecs:   make([]codec, len(specs)),
		elemSize: elemSize,
	}
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, err)
		}
		s = s.normalize()
		c, err := newCodec(s, elemSize)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, err)
		}
		p.specs[i], p.codecs[i] = s, c
	}
	return p, nil
}

// Specs returns a copy of the pipeline's filters (levels normalised).
func (p *Pipeline) Specs() []Spec { return slices.Clone(p.specs) }

// ElemSize returns the element size the pipeline shuffles by.
func (p *Pipeline) ElemSize() int { return p.elemSize }

// String joins the filter names with "+", e.g. "shuffle+zstd(1)"; an empty
// pipeline is "none".
func (p *Pipeline) String() string {
	if len(p.specs) == 0 {
		return "none"
	}
	names := make([]string, len(p.specs))
	for i, s := range p.specs {
		names[i] = s.String()
	}
	return strings.Join(names, "+")
}

// Encode applies the filters in order and returns the on-disk image and the
// filter mask. A compressor whose output would not be smaller than its input
// is skipped and bit i of mask is set for it (HDF5's optional filters), so
// an incompressible chunk is stored raw rather than grown. The image is a
// new, exactly sized slice owned by the caller; it never aliases src.
func (p *Pipeline) Encode(src []byte) (image []byte, mask uint32, err error) {
	return p.EncodeTo(nil, src)
}

// MaxEncoded bounds the image Encode makes of n bytes: filters that would
// grow a chunk are skipped, except CRC32C, which adds its trailer.
func (p *Pipeline) MaxEncoded(n int) int {
	for _, s := range p.specs {
		if s.ID == CRC32C {
			n += crcLen
		}
	}
	return n
}

// EncodeTo is Encode writing the image into dst's storage: with
// cap(dst) >= MaxEncoded(len(src)) the image is dst[:len(image)] and
// nothing is allocated (recycled chunk buffers); with a
// smaller (or nil) dst it is a new, exactly sized slice. dst must not
// overlap src.
func (p *Pipeline) EncodeTo(dst, src []byte) (image []byte, mask uint32, err error) {
	if len(src) > MaxChunkSize {
		return nil, 0, fmt.Errorf("%w: chunk of %d bytes exceeds %d", ErrInvalid, len(src), MaxChunkSize)
	}
	if dst != nil && cap(dst) < p.MaxEncoded(len(src)) {
		dst = nil
	}
	cur := src
	var held *scratch // pooled buffer backing cur, if any
	fresh := false    // cur is an exactly sized slice we may hand out
	inDst := false    // cur is backed by dst
	last := len(p.codecs) - 1
	for i, c := range p.codecs {
		need := c.encodeCap(len(cur))
		var s *scratch
		var out []byte
		switch {
		case i == last && dst != nil && !inDst:
			// The final stage writes the image straight into dst (capped
			// at need: compressors bound their output by the capacity).
			out = dst[:0:need]
		case i == last && dst == nil && !p.specs[i].ID.optional():
			// The final stage's size is known: write the image directly
			// instead of copying it out of a scratch buffer.
			out = make([]byte, 0, need)
		default:
			s = getScratch(need)
			out = s.b[:0:need]
		}
		o, ok := c.encode(out, cur)
		if !ok {
			putScratch(s)
			mask |= 1 << i
			continue
		}
		putScratch(held)
		in := s == nil && dst != nil && len(o) > 0 && &o[0] == &dst[:1][0]
		held, cur, fresh, inDst = s, o, s == nil && !in, in
	}
	switch {
	case inDst:
		cur = dst[:len(cur)] // dst's whole capacity: room for a trailer
	case dst != nil:
		image = append(dst[:0], cur...)
		cur = image
	case !fresh:
		image = make([]byte, len(cur))
		copy(image, cur)
		cur = image
	}
	putScratch(held)
	return cur, mask, nil
}

// Decode reverses Encode: it undoes the filters in reverse order, skipping
// those whose mask bit is set, and returns a new slice of exactly
// decodedSize bytes owned by the caller.
//
// image and mask are treated as hostile. Every stage is bounded before it
// allocates: the size of the chunk between filters i and i+1 is at most
// decodedSize plus 4 per CRC32C filter before it, minus 1 per applied
// compressor before it (a compressor that was kept made its input smaller),
// and exact when no compressor was applied before it. A length claimed by a
// zstd frame or an LZ4 prefix is checked against that bound before any
// buffer is made, and decoders are never given room to write past it (zstd
// checks sizes between blocks, so it gets one block, 128 KiB, of headroom in
// a pooled buffer, unless its block headers bound its output by the buffer
// it writes into, as they do for a frame of whole 128 KiB blocks). Memory
// per call is therefore at most the result plus one pooled scratch buffer
// per applied stage, each at most 25% over that stage's bound (plus 128 KiB
// for zstd), whatever the image claims. Bad input of any kind returns an error wrapping ErrCorrupt; a
// negative or too large decodedSize wraps ErrInvalid.
func (p *Pipeline) Decode(image []byte, mask uint32, decodedSize int) ([]byte, error) {
	return p.DecodeTo(nil, image, mask, decodedSize)
}

// DecodeTo is Decode writing the chunk into dst's storage: with
// cap(dst) >= decodedSize the result is dst[:decodedSize] and no buffer is
// allocated for it (recycled chunk buffers); otherwise it is a
// new slice. dst must not overlap image. On error dst's contents are
// undefined.
func (p *Pipeline) DecodeTo(dst, image []byte, mask uint32, decodedSize int) ([]byte, error) {
	return p.decodeTo(dst, image, mask, decodedSize, false)
}

// DecodeVerifiedTo is DecodeTo for an image whose bytes the caller has
// already verified against a checksum stored beside them (a chunk frame's
// CRC32C): checksums inside the codecs' streams that cover the same
// information (a zstd frame checksum, over bytes decoded deterministically
// from the verified image) are not computed again. Every bound and framing
// check stays, and a CRC32C filter in the pipeline is still verified: it is
// a check the dataset asked for.
func (p *Pipeline) DecodeVerifiedTo(dst, image []byte, mask uint32, decodedSize int) ([]byte, error) {
	return p.decodeTo(dst, image, mask, decodedSize, true)
}

func (p *Pipeline) decodeTo(dst, image []byte, mask uint32, decodedSize int, verified bool) ([]byte, error) {
	if dst != nil && cap(dst) < decodedSize {
		dst = nil
	}
	if decodedSize < 0 || decodedSize > MaxChunkSize {
		return nil, fmt.Errorf("%w: decoded size %d not in [0, %d]", ErrInvalid, decodedSize, MaxChunkSize)
	}
	n := len(p.codecs)
	if mask>>n != 0 {
		return nil, fmt.Errorf("%w: mask %#x has bits beyond the %d filters", ErrCorrupt, mask, n)
	}

	// hi[i] bounds the length of the bytes entering filter i on encode
	// (hi[n] bounds the image); exact[i] says the length must equal it.
	var hi [MaxFilters + 1]int
	var exact [MaxFilters + 1]bool
	hi[0], exact[0] = decodedSize, true
	first := -1 // lowest applied filter: the last to decode
	for i, s := range p.specs {
		hi[i+1], exact[i+1] = hi[i], exact[i]
		if mask&(1<<i) != 0 {
			if !s.ID.optional() {
				return nil, fmt.Errorf("%w: mask marks filter %d (%s) skipped, but it is not optional", ErrCorrupt, i, s)
			}
			continue
		}
		if first < 0 {
			first = i
		}
		switch {
		case s.ID == CRC32C:
			hi[i+1] += crcLen
		case s.ID.optional():
			if hi[i] < 1 {
				return nil, fmt.Errorf("%w: filter %d (%s) applied to an empty input", ErrCorrupt, i, s)
			}
			hi[i+1], exact[i+1] = hi[i]-1, false
		}
	}
	if err := checkLen(len(image), hi[n], exact[n]); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if first < 0 {
		// Nothing to undo; exact[n] held, so len(image) == decodedSize.
		out := dst[:0]
		if dst == nil {
			out = make([]byte, 0, len(image))
		}
		return append(out, image...), nil
	}

	cur := image
	var held *scratch // pooled buffer backing cur, if any
	defer func() { putScratch(held) }()
	for i := n - 1; i >= first; i-- {
		if mask&(1<<i) != 0 {
			continue
		}
		c, s := p.codecs[i], p.specs[i]
		final := i == first
		if v, ok := c.(viewDecoder); ok && !final {
			out, err := v.decodeView(cur)
			if err == nil {
				err = checkLen(len(out), hi[i], exact[i])
			}
			if err != nil {
				return nil, fmt.Errorf("filter %d (%s): %w", i, s, err)
			}
			cur = out // still backed by held (or by image)
			continue
		}

		limit := hi[i]
		claim, err := c.claimedLen(cur)
		if err == nil && claim >= 0 {
			err = checkLen(claim, hi[i], exact[i])
			if err == nil && s.ID.optional() && claim <= len(cur) {
				err = fmt.Errorf("%w: claims %d bytes from %d, but a kept compressor shrinks its input", ErrCorrupt, claim, len(cur))
			}
			limit = claim
		}
		if m := c.maxOutput(len(cur)); err == nil && m >= 0 && m < limit {
			if exact[i] || claim >= 0 {
				err = fmt.Errorf("%w: %d bytes cannot decode to %d", ErrCorrupt, len(cur), limit)
			}
			limit = m
		}
		if err != nil {
			return nil, fmt.Errorf("filter %d (%s): %w", i, s, err)
		}

		// INVARIANT: when final, every filter below first is masked (an
		// identity), so exact[first] holds and limit == decodedSize.
		//
		// The final stage writes straight into the caller's buffer (or an
		// exactly sized new one) whenever that buffer can hold all the
		// stage may write; only a decoder that may overrun a lying length
		// by more than the buffer's spare room gets a scratch buffer and a
		// copy after it.
		need := limit + c.overrun()
		if b, ok := c.(boundedDecoder); ok && need > limit {
			need = max(limit, min(need, b.outputBound(cur)))
		}
		var sb *scratch
		var to []byte
		switch {
		case final && dst != nil && cap(dst) >= need:
			to = dst[:0:cap(dst)]
		case final && need == limit:
			to = make([]byte, 0, limit) // the caller's slice, exactly sized
		default:
			sb = getScratch(need)
			to = sb.b[:0:need]
		}
		var out []byte
		if t, ok := c.(trustingDecoder); ok && verified {
			out, err = t.decodeTrusted(to, cur)
		} else {
			out, err = c.decode(to, cur)
		}
		if err == nil {
			err = checkLen(len(out), hi[i], exact[i])
		}
		if err == nil && claim >= 0 && len(out) != claim {
			err = fmt.Errorf("%w: decoded %d bytes, header claims %d", ErrCorrupt, len(out), claim)
		}
		if err == nil && s.ID.optional() && len(out) <= len(cur) {
			err = fmt.Errorf("%w: decoded %d bytes from %d, but a kept compressor shrinks its input", ErrCorrupt, len(out), len(cur))
		}
		if err != nil {
			putScratch(sb)
			return nil, fmt.Errorf("filter %d (%s): %w", i, s, err)
		}
		if final && sb != nil {
			// The decoder needed room to overrun; hand out an exact copy.
			var exactOut []byte
			if dst != nil {
				exactOut = append(dst[:0], out...)
			} else {
				exactOut = make([]byte, len(out))
				copy(exactOut, out)
			}
			putScratch(sb)
			sb, out = nil, exactOut
		}
		putScratch(held)
		held, cur = sb, out
	}
	return cur, nil
}

func checkLen(n, hi int, exact bool) error {
	if exact && n != hi {
		return fmt.Errorf("%w: %d bytes, want exactly %d", ErrCorrupt, n, hi)
	}
	if n > hi {
		return fmt.Errorf("%w: %d bytes, more than the bound %d", ErrCorrupt, n, hi)
	}
	return nil
}
