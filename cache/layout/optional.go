package layout

// Evicter is implemented by layouts whose chunks hold resources beyond Go
// memory, or that recycle buffers (H5SC_chunk_evict_t). The cache calls
// Evict once when it drops a chunk and never touches the chunk again.
type Evicter interface {
	Evict(coord Coord, chunk Chunk)
}

// Condenser is implemented by layouts whose chunks can give back slack
// memory (H5SC_chunk_condense_t); the cache calls it before it would evict
// for space.
type Condenser interface {
	Condense(coord Coord, chunk Chunk) Chunk
}

// FlatScatterer is implemented by layouts whose chunks keep their
// elements in one byte buffer that stays the same from the chunk's making
// to its eviction (Gather, Trim and writes change its bytes in place,
// never the buffer; Condense returns a new chunk). The cache asks
// FlatBytes once when it installs a chunk (made, decoded, or condensed)
// and keeps the buffer's address on the line of its chunk table entry
// that every hit reads anyway; a read hit then calls ScatterFlat with
// those bytes instead of Scatter with the chunk, and never loads the
// chunk's own header, which with many resident chunks is one more cache
// miss per hit. ScatterFlat(FlatBytes(c), p) must do exactly what
// Scatter(c, p) does, under the same contract (the latch rules, the
// buffer never recycled while it runs). FlatBytes returns nil for a chunk
// without such a buffer; the cache then calls Scatter.
type FlatScatterer interface {
	FlatBytes(chunk Chunk) []byte
	ScatterFlat(b []byte, p Piece) error
}

// BorrowingEncoder is implemented by layouts whose disk image of a chunk
// can be the chunk's own memory (an unfiltered dense chunk and a checksum
// trailer written into its buffer's spare capacity): write-back then sends
// the chunk's bytes to the file without copying them into an image first.
//
// The cache calls EncodeBorrowed only to write the image back, never to
// keep it (the pre-encoder and prefetch use Encode). It holds the chunk's
// latch shared from the call until the vector write that carries the image
// has returned, through Layout.Insert of the write-back round, so no
// Gather or Trim can change the bytes while they are written; writers of
// that chunk wait meanwhile, as they wait for any Encode. An image with
// Pooled set is taken to be a copy (the layout may fall back to Encode)
// and releases the latch at once; one without is taken to alias the chunk.
type BorrowingEncoder interface {
	EncodeBorrowed(coord Coord, chunk Chunk) (Encoded, error)
}

// Committer is implemented by layouts whose chunks remember which stored
// version of them they match, so that a write-back can take from it what
// did not change (a sharded chunk re-encodes only the inner chunks
// written since). The cache calls Committed once a write-back's image of
// chunk (enc, as Encode or EncodeBorrowed returned it, Tag included) is
// written and published at loc, whether or not the chunk changed since it
// was encoded, holding the chunk's latch exclusively. An image whose
// Insert, write or Publish failed, or that was encoded and never written
// (a kept image of a version that changed, an image made for a cache
// image), is never reported.
type Committer interface {
	Committed(coord Coord, chunk Chunk, enc Encoded, loc Location)
}

// The interfaces below are the optional paths around the cache: a layout
// that implements one lets the cache read or write its chunks without
// making them resident, or checksum them by pieces. Each path is
// described in the file named in its doc.

// DirectReader is implemented by layouts whose stored images can be read
// straight into the caller's buffer (the path: cache/direct.go).
type DirectReader interface {
	// DirectTarget returns, for a read piece and the chunk's location,
	// the caller's bytes the chunk's stored bytes map onto exactly (the
	// piece selects the whole chunk, contiguous in the caller's buffer, and
	// the image is the chunk without filters) and the length of the
	// trailer stored after them; ok false means "not directly".
	DirectTarget(loc Location, p Piece) (dst []byte, trailer int, ok bool)
	// VerifyDirect checks the bytes read into dst and the trailer against
	// each other and against loc, returning an error wrapping the layout's
	// corruption sentinel on a mismatch. dst's contents are then undefined.
	VerifyDirect(coord Coord, loc Location, dst, trailer []byte) error
}

// DirectSummer is implemented by DirectReaders whose check of the bytes
// read is a checksum that can be computed by pieces and combined, so that
// a split read (cache/splitread.go) sums each piece on the goroutine that read
// it.
type DirectSummer interface {
	DirectReader
	// SumDirect returns the checksum of b, a piece of a chunk's bytes.
	SumDirect(b []byte) uint32
	// CombineDirect returns the checksum of a||b from the checksums of a
	// and b and b's length.
	CombineDirect(sa, sb uint32, nb int64) uint32
	// VerifyDirectSum is VerifyDirect given sum, the checksum of all of
	// dst computed by pieces: it checks the trailer and sum against loc.
	VerifyDirectSum(coord Coord, loc Location, sum uint32, dst, trailer []byte) error
}

// Block is a byte range of a chunk's stored image, from Location.Addr.
type Block struct{ Off, Len int64 }

// PartReader is implemented by layouts whose stored chunks can be read
// and verified in part (the path: cache/directpart.go).
type PartReader interface {
	// PartBlocks returns the blocks of the stored image at loc that
	// serve pieces (every request of the read that falls in the chunk),
	// each of which the layout can verify on its own; ok false means
	// "not in part" and the cached path serves the read. Blocks lie
	// inside [0, loc.Size) and do not overlap.
	PartBlocks(coord Coord, loc Location, pieces []Piece) (blocks []Block, ok bool)
	// ReadPart verifies each block read (bufs[i] holds blocks[i]) against
	// its own checksum and serves the pieces from them as Scatter would.
	// A mismatch is an error wrapping the layout's corruption sentinel;
	// the caller's bytes of the pieces are then undefined. ReadPart owns
	// bufs (from internal/bufpool) and may give them back with bufpool.Put.
	ReadPart(coord Coord, loc Location, pieces []Piece, blocks []Block, bufs [][]byte) error
}

// PartFirst is implemented by PartReaders whose blocks are units the layout
// encodes alone (a sharded chunk's inner chunks): for them a read of part
// of a chunk that is not resident goes in part whatever the chunk's size,
// since loading the chunk to serve a part of it would decode all of it,
// and caching it would hold memory a part read never needs. Other
// PartReaders read in part only chunks larger than Config.BypassBytes.
type PartFirst interface {
	PartReader
	// PartFirst reports whether the layout wants part reads first.
	PartFirst() bool
}

// DirectWriter is implemented by layouts whose stored image of a chunk can
// be the caller's bytes themselves, framed by small side buffers (the
// path: cache/directwrite.go).
type DirectWriter interface {
	// DirectSource returns the caller's bytes that are the chunk's
	// unfiltered contents for a piece that selects the whole chunk (they
	// are contiguous in the caller's buffer); ok false means "not
	// directly". It must not copy: the bytes are written as they are.
	DirectSource(coord Coord, p Piece) (src []byte, ok bool)
	// DirectFrame returns the frame around src: head is written before it
	// and tail after it (either may be empty), sum is what Encode would
	// have reported as Encoded.Sum for the same frame. The image stored is
	// head+src+tail with filter mask 0.
	DirectFrame(coord Coord, src []byte) (head, tail []byte, sum uint32)
}

// LateFramer is implemented by DirectWriters whose frame can be laid out
// before the checksum it carries is known (the path: cache/directwrite.go,
// "Checksums beside the write"): for a large chunk the cache computes the
// checksum on another core while it writes head and src, and writes the
// tail, which carries the checksum, once it is known. A DirectWriter that
// does not implement it has its frame computed by DirectFrame, before the
// write, on the writing goroutine.
//
// The cache calls Insert for such a chunk with Insertion.Sum 0 and sets
// Sum and New.Sum to SealFrame's sum before it calls Publish (which it
// calls only after head, src and tail are all written, or one of those
// writes failed).
type LateFramer interface {
	DirectWriter
	// DirectFrameLate returns the frame around src as DirectFrame would,
	// without computing src's checksum: head is final, and tail has its
	// final length but its bytes are undefined until SealFrame fills them.
	// A tail may be empty (the checksum goes to the index only).
	DirectFrameLate(coord Coord, src []byte) (head, tail []byte)
	// SealFrame computes src's checksum, writes it into tail (as
	// DirectFrameLate returned it) where the frame carries it, and returns
	// what DirectFrame would have returned as sum for the same frame. It
	// only reads src, and may run on any goroutine, while head and src
	// are being written.
	SealFrame(coord Coord, src, tail []byte) (sum uint32)
}

// LateBorrower is implemented by BorrowingEncoders whose borrowed image
// can be written before the checksum it ends with is known, as a
// LateFramer's frame is (the path: cache/latesum.go, write-back).
type LateBorrower interface {
	BorrowingEncoder
	LateFramer
	// EncodeBorrowedLate is EncodeBorrowed without the checksum: with ok,
	// the image's last tail bytes are undefined until SealFrame(coord,
	// image[:len(image)-tail], image[len(image)-tail:]) fills them, and
	// SealFrame's result is the image's Sum. Without ok, enc is complete
	// (EncodeBorrowed's or Encode's). The cache calls it under
	// EncodeBorrowed's rules, and SealFrame while it still holds the
	// chunk's latch shared.
	EncodeBorrowedLate(coord Coord, chunk Chunk) (enc Encoded, tail int, ok bool, err error)
}

// WriteCounter is implemented by layouts whose chunks a sequence of
// partial writes can complete, and whose write-back of a chunk needs no
// memory beyond it (the image borrows the chunk's buffer): a chunk created
// in memory whose written bytes reach its size is written back and dropped
// at once, as a whole-chunk write of it would have gone straight to the
// file (cache/completed.go).
type WriteCounter interface {
	// WrittenBytes reports how many bytes of a chunk of whole bytes the
	// piece p writes; ok false means "do not count this dataset's
	// writes".
	WrittenBytes(p Piece) (n, whole int64, ok bool)
}

// SummedDecoder is implemented by layouts whose Decode verifies a checksum
// that can be computed by pieces (DirectSummer's SumDirect and
// CombineDirect) over a prefix of the stored image.
type SummedDecoder interface {
	DirectSummer
	// SummedLen returns how many leading bytes of the stored image at loc
	// its checksum covers, or -1 when this image cannot be decoded from a
	// sum (Decode is used).
	SummedLen(loc Location) int64
	// DecodeSummed is Decode given sum, the checksum of
	// image[:SummedLen(loc)] computed by pieces while it was read: it
	// checks sum where Decode would compute it. It owns image as Decode
	// does.
	DecodeSummed(coord Coord, loc Location, image []byte, sum uint32) (Chunk, error)
}

// ScatterDecoder is implemented by layouts that can decode a chunk read
// only to be scattered (a transient decode, cache/directdecode.go) a piece
// at a time, scattering each decoded piece while it is in the core's cache
// instead of decoding the whole chunk into a buffer and scattering from
// it: for chunks larger than the caches, the scatter then reads no decoded
// byte back from memory.
type ScatterDecoder interface {
	// DecodeScatter verifies the stored image read from loc (against sum,
	// the checksum computed by pieces while it was read, when summed:
	// SummedDecoder) and scatters the chunk into every piece, as Decode
	// and then Scatter of each piece would. ok false means "not this
	// image or these pieces": image is untouched and Decode is used.
	// Otherwise it owns image as Decode does; on an error the pieces'
	// bytes are undefined.
	DecodeScatter(coord Coord, loc Location, image []byte, pieces []Piece, summed bool, sum uint32) (ok bool, err error)
}

// ScatterHolder is implemented by ScatterDecoders that tell, once the
// image is read and before DecodeScatter runs, whether it will stream and
// how much memory it holds meanwhile (its decoder's window and buffers), so
// that a transient decode reserves that instead of a whole chunk.
type ScatterHolder interface {
	// ScatterHold reports whether DecodeScatter of image, read from loc,
	// into pieces decodes (ok) and the bytes it holds while it does.
	ScatterHold(loc Location, image []byte, pieces []Piece) (hold int64, ok bool)
}

// DirectDecoder is implemented by layouts whose chunks can be decoded
// straight into the caller's buffer (the path: cache/directdecode.go).
type DirectDecoder interface {
	// DecodeTarget returns, for a read piece and the chunk's location, the
	// caller's bytes the decoded chunk maps onto exactly (the piece
	// selects the whole chunk, contiguous in the caller's buffer, in the
	// chunk's element order); ok false means "not directly".
	DecodeTarget(loc Location, p Piece) (dst []byte, ok bool)
	// DecodeInto verifies the stored image read from loc and decodes it
	// into dst, as Decode would into a chunk of its own. It owns image as
	// Decode does. A damaged image is an error wrapping the layout's
	// corruption sentinel; dst's contents are then undefined.
	DecodeInto(coord Coord, loc Location, image, dst []byte) error
}

// DirectEncoder is implemented by layouts whose chunks can be encoded
// straight from the caller's buffer (the path:
// cache/directwrite_encode.go).
type DirectEncoder interface {
	// EncodeSource returns, for a write piece that selects the whole
	// chunk, the caller's bytes that are the chunk's contents (contiguous
	// in the caller's buffer, in the chunk's element order); ok false
	// means "not directly".
	EncodeSource(coord Coord, p Piece) (src []byte, ok bool)
	// EncodeFrom builds the disk image of a chunk holding src, as Encode
	// would for a chunk of its own with those contents. It neither keeps
	// nor modifies src.
	EncodeFrom(coord Coord, src []byte) (Encoded, error)
}

// RowReader is implemented by layouts whose whole stored chunks can be
// read by rows into the caller's buffer (the path: cache/directrows.go).
type RowReader interface {
	// RowTarget returns, for a read piece and the chunk's location, the
	// runs of the caller's buffer the stored chunk's bytes map onto in
	// order (the piece selects the whole chunk), and the length of the
	// stored trailer that follows those bytes; ok false means "not by
	// rows".
	RowTarget(loc Location, p Piece) (rows Rows, trailer int, ok bool)
	// SumRow returns the checksum of the bytes summed so far, whose
	// checksum is sum (0 before the first row), followed by b.
	SumRow(sum uint32, b []byte) uint32
	// VerifyDirectSum checks the chunk read, given sum, the checksum of
	// all its rows in order, and the trailer read (DirectSummer's).
	VerifyDirectSum(coord Coord, loc Location, sum uint32, dst, trailer []byte) error
}

// Rows are equal runs of Buf, in order: an odometer over the outer
// dimensions (outermost first) steps Count[d] times by Step[d] bytes along
// dimension d, from the row at First; each row is Len bytes.
type Rows struct {
	Buf   []byte
	First uint64
	Len   uint64
	Count []uint64
	Step  []uint64
}
