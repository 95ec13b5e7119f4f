package format

import (
	"fmt"
)

// The cache image block (FORMAT.md §20; Cache image RFC §4.2 "Metadata Cache
// Image"): one block, written by a writable File's Close, holding the
// encoded (on-disk) form of the blocks the cache held — the catalog,
// dataset headers, chunk index blocks and the hottest clean chunks — each
// with its address, size, kind, checksum, age and rank in the replacement
// order, plus an opaque, versioned section with the cache's sizing state.
// The superblock's ImageRecord names it. An open reads it with one read and
// serves the blocks it holds from memory.
//
// Nothing in an image is trusted on its own: an entry is used only for a
// read of exactly its address and size whose parent (superblock → catalog,
// catalog → header, index block → child, index entry → chunk) records the
// entry's checksum; anything else reads the file as if there were no
// image.

// Image entry kinds. They never change.
const (
	ImageCatalog uint8 = 1 // the catalog block
	ImageHeader  uint8 = 2 // a dataset header block
	ImageIndex   uint8 = 3 // a chunk index block (engine/internal/index)
	ImageChunk   uint8 = 4 // a chunk frame (FORMAT.md §9)
	imageKinds         = 4
)

// Image limits.
const (
	// MaxImageBytes bounds an image block.
	MaxImageBytes = 1 << 30
	// MaxImageSizing bounds the sizing section.
	MaxImageSizing = 1 << 16
	// MaxImageAge is the largest age an entry records; ages saturate there.
	MaxImageAge = 255
)

var magicImage = [4]byte{'S', 'C', 'C', 'I'}

const (
	imageFixed = 48 // magic .. second reserved word
	imageEntry = 24 // one entry descriptor
	imageMin   = imageFixed + crcSize
	imageFree  = 16 // one free-space extent
	// imageFlagSizing: the sizing section is present.
	imageFlagSizing = 1
	// imageFlagFree: the free-space map is present (its extent count is
	// the word at 44, reserved and zero before it existed).
	imageFlagFree = 2
)

// Image is a decoded cache image block.
type Image struct {
	// Generation is the superblock generation that records the image, and
	// CatalogSum that generation's catalog checksum; an image whose
	// generation or catalog checksum differs from the superblock read at
	// open is stale and ignored (FORMAT.md §20).
	Generation uint64
	FileID     [16]byte
	CatalogSum uint32
	// Sizing is the cache's sizing configuration and state, opaque here
	// (its first byte is its own version, owned by package cache); nil
	// when the image has none.
	Sizing []byte
	// Free is the free-space map of the state the image describes: the
	// extents below its EOF that nothing in it references, in address
	// order, not overlapping, the image's own extent NOT removed (the
	// image is placed after the map is taken). nil means no map. HasFree
	// tells an empty map (a file with no free space) from none. No open
	// allocates from it: nothing in the state can confirm it short of a
	// walk of every index (FORMAT.md §20).
	Free    []FreeExtent
	HasFree bool
	// Entries in address order: each ends at or before the next one's
	// address (so a reader finds an entry by binary search and checks the
	// order in one pass).
	Entries []ImageEntry
}

// FreeExtent is one extent of an image's free-space map.
type FreeExtent struct{ Off, Size uint64 }

// ImageEntry is one block held by an image.
type ImageEntry struct {
	Kind uint8
	// Age counts the images the entry appeared in without being requested
	// (0: it was in use when the image was written); Cache image RFC §4.2 "Age".
	Age uint8
	// Rank is the entry's place in the replacement order, 0 the most
	// recently used (what a reader with too little memory keeps first,
	// and the order a writer carries entries forward in).
	Rank uint32
	// Addr is where the block lives in the file; len(Data) its size.
	Addr uint64
	// Data is the block's on-disk bytes; its last four bytes are its
	// CRC32C trailer (Sum), which is what the block's parent records. A
	// decoded image's Data aliases the decoded buffer.
	Data []byte
}

// Sum is the entry's checksum: its block's CRC32C trailer.
func (e ImageEntry) Sum() uint32 { return Trailer(e.Data) }

// ImageSize is the length EncodeImage will produce for img.
func ImageSize(img Image) int64 {
	n := int64(imageFixed+crcSize) + int64(len(img.Sizing)) + int64(len(img.Free))*imageFree
	for _, e := range img.Entries {
		n += imageEntry + int64(len(e.Data))
	}
	return n
}

// ImageEntrySize is what one entry of n data bytes adds to an image.
func ImageEntrySize(n int) int64 { return imageEntry + int64(n) }

// ValidateImage reports whether img may be encoded; the error wraps
// ErrInvalid.
func ValidateImage(img Image) error {
	if err := img.validate(); err != nil {
		return fmt.Errorf("%w: image: %w", ErrInvalid, err)
	}
	return nil
}

func (img Image) validate() error {
	if len(img.Sizing) > MaxImageSizing {
		return fmt.Errorf("sizing section of %d bytes (at most %d)", len(img.Sizing), MaxImageSizing)
	}
	if n := ImageSize(img); n > MaxImageBytes {
		return fmt.Errorf("%d bytes (at most %d)", n, MaxImageBytes)
	}
	if len(img.Free) > 0 && !img.HasFree {
		return fmt.Errorf("%d free extents without the free-space flag", len(img.Free))
	}
	end := uint64(DataStart)
	for i, x := range img.Free {
		switch {
		case x.Size == 0:
			return fmt.Errorf("free extent %d is empty", i)
		case x.Off < end:
			return fmt.Errorf("free extent %d at %d starts before %d", i, x.Off, end)
		case x.Off > 1<<63-1-x.Size:
			return fmt.Errorf("free extent %d [%d,+%d) past 2^63", i, x.Off, x.Size)
		}
		end = x.Off + x.Size
	}
	end = 0
	for i, e := range img.Entries {
		switch {
		case e.Kind == 0 || e.Kind > imageKinds:
			return fmt.Errorf("entry %d: kind %d", i, e.Kind)
		case len(e.Data) < crcSize:
			return fmt.Errorf("entry %d: %d bytes, a block has at least %d", i, len(e.Data), crcSize)
		case e.Addr < DataStart || e.Addr > 1<<63-1-uint64(len(e.Data)):
			return fmt.Errorf("entry %d: block [%d,+%d) outside [%d, 2^63)", i, e.Addr, len(e.Data), DataStart)
		case e.Addr < end:
			// Out of order, or over the previous entry's bytes: two
			// blocks of one state never overlap.
			return fmt.Errorf("entry %d at %d starts before the previous one ends (%d)", i, e.Addr, end)
		}
		end = e.Addr + uint64(len(e.Data))
	}
	return nil
}

// EncodeImage returns img as an image block. Encode only values that pass
// ValidateImage.
func EncodeImage(img Image) []byte {
	return AppendImage(make([]byte, 0, ImageSize(img)), img)
}

// AppendImage appends img's block to dst (which callers size with
// ImageSize, so that a reused buffer takes it without growing).
func AppendImage(dst []byte, img Image) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, imageFixed)...)
	b := dst[start:]
	copy(b, magicImage[:])
	b[4] = ImageVersion
	if img.Sizing != nil {
		b[5] = imageFlagSizing
	}
	if img.HasFree {
		b[5] |= imageFlagFree
		le.PutUint32(b[44:], uint32(len(img.Free)))
	}
	le.PutUint64(b[8:], img.Generation)
	copy(b[16:], img.FileID[:])
	le.PutUint32(b[32:], img.CatalogSum)
	le.PutUint32(b[36:], uint32(len(img.Entries)))
	le.PutUint32(b[40:], uint32(len(img.Sizing)))
	dst = append(dst, img.Sizing...)
	for _, x := range img.Free {
		dst = le.AppendUint64(dst, x.Off)
		dst = le.AppendUint64(dst, x.Size)
	}
	for _, e := range img.Entries {
		dst = append(dst, e.Kind, e.Age, 0, 0)
		dst = le.AppendUint32(dst, e.Rank)
		dst = le.AppendUint64(dst, e.Addr)
		dst = le.AppendUint32(dst, uint32(len(e.Data)))
		dst = le.AppendUint32(dst, e.Sum())
	}
	for _, e := range img.Entries {
		dst = append(dst, e.Data...)
	}
	return le.AppendUint32(dst, Checksum(dst[start:]))
}

// DecodeImage decodes an image block. It allocates only the entry list,
// bounded by the block's length; entries' Data alias b.
func DecodeImage(b []byte) (Image, error) {
	if len(b) > MaxImageBytes {
		return Image{}, corrupt("image", "%d bytes (at most %d)", len(b), MaxImageBytes)
	}
	_, version, err := openFrame("image", b, magicImage, imageMin)
	if err != nil {
		return Image{}, err
	}
	if version < ImageVersion {
		// Images came with version 2: a v1 image block cannot exist.
		return Image{}, corrupt("image", "version %d (images exist from version %d)", version, ImageVersion)
	}
	flags := b[5]
	nfree := uint64(le.Uint32(b[44:]))
	if flags&^(imageFlagSizing|imageFlagFree) != 0 || b[6] != 0 || b[7] != 0 || flags&imageFlagFree == 0 && nfree != 0 {
		return Image{}, corrupt("image", "reserved flags or bytes set")
	}
	img := Image{Generation: le.Uint64(b[8:]), CatalogSum: le.Uint32(b[32:])}
	copy(img.FileID[:], b[16:32])
	n, s := uint64(le.Uint32(b[36:])), uint64(le.Uint32(b[40:]))
	end := uint64(len(b) - crcSize)
	pos := uint64(imageFixed)
	switch {
	case (flags&imageFlagSizing != 0) != (s != 0):
		return Image{}, corrupt("image", "sizing flag %d with a section of %d bytes", flags&imageFlagSizing, s)
	case s > MaxImageSizing || s > end-pos:
		return Image{}, corrupt("image", "sizing section of %d bytes, %d left", s, end-pos)
	}
	if s != 0 {
		img.Sizing = b[pos : pos+s]
	}
	pos += s
	if flags&imageFlagFree != 0 {
		if nfree > (end-pos)/imageFree {
			return Image{}, corrupt("image", "%d free extents in %d bytes", nfree, end-pos)
		}
		img.HasFree = true
		img.Free = make([]FreeExtent, nfree)
		for i := range img.Free {
			img.Free[i] = FreeExtent{Off: le.Uint64(b[pos:]), Size: le.Uint64(b[pos+8:])}
			pos += imageFree
		}
	}
	// Each entry takes a descriptor and at least a checksum's worth of
	// data: bound the count by what is left before allocating.
	if n > (end-pos)/(imageEntry+crcSize) {
		return Image{}, corrupt("image", "%d entries in %d bytes", n, end-pos)
	}
	img.Entries = make([]ImageEntry, n)
	data := pos + n*imageEntry
	for i := range img.Entries {
		d := b[pos+uint64(i)*imageEntry:]
		size, sum := uint64(le.Uint32(d[16:])), le.Uint32(d[20:])
		if d[2] != 0 || d[3] != 0 {
			return Image{}, corrupt("image", "entry %d: reserved bytes set", i)
		}
		if size > end-data {
			return Image{}, corrupt("image", "entry %d of %d bytes, %d left", i, size, end-data)
		}
		e := ImageEntry{Kind: d[0], Age: d[1], Rank: le.Uint32(d[4:]), Addr: le.Uint64(d[8:]), Data: b[data : data+size : data+size]}
		if size >= crcSize && e.Sum() != sum {
			return Image{}, corrupt("image", "entry %d: checksum %08x, data ends in %08x", i, sum, e.Sum())
		}
		img.Entries[i] = e
		data += size
	}
	if data != end {
		return Image{}, corrupt("image", "%d trailing bytes", end-data)
	}
	if err := img.validate(); err != nil {
		return Image{}, corrupt("image", "%v", err)
	}
	return img, nil
}
