// Package zarr exports scc files to Zarr stores (format v2 and v3, as a
// directory tree) and imports Zarr stores into scc files, in pure Go on top
// of package engine.
//
// Mapping: every dataset becomes an array at the path of its
// name ("a/b" is array b in group a), the file's attributes become the root
// group's, and a dataset's attributes the array's (.zattrs in v2, the
// "attributes" of zarr.json in v3). Shape is the current extent (an
// unlimited dimension exports at its current size), the chunk grid is the
// dataset's chunk shape, elements are little-endian in C order, the fill
// value is the dataset's. Chunks never written are not written either:
// Zarr readers, like scc, read them as the fill value. Edge chunks are
// stored whole in both formats, with the fill value outside the extent.
//
// Types: the integer and float types map onto their numpy dtypes (v2) and
// v3 core data types; Bool onto "|b1" / "bool" (fill value a JSON
// boolean); Complex64 and Complex128 onto "<c8"/"<c16" / "complex64"/
// "complex128" (fill value a [real, imaginary] pair of float forms, as the
// v3 specification and zarr-python 2 write it; a bare number is read as
// the real part). A fixed-length string that is NUL-padded maps onto
// numpy's "|S<n>" (v3: zarr-python's null_terminated_bytes extension, the
// same numpy dtype), fill value the base64 of its bytes, and imports as
// engine.FixedString(n, NullPad, ASCII). Without a mapping, and so left
// out of an export and named with why (refused with ErrUnsupported under
// Options.Strict): UTF-8 strings (Zarr's fixed-length
// unicode "<U<n>" / fixed_length_utf32 counts UTF-32 code points, not
// UTF-8 bytes, so neither direction keeps the type), NUL-terminated and
// space-padded strings (Zarr's fixed bytes are NUL-padded only), and
// variable-length datasets. Attributes of the bool, complex and string
// types are written as JSON values (strings as their text) with their scc
// type recorded, so import restores them exactly.
//
// Codecs: scc's filter pipeline maps stage by stage onto Zarr codecs —
// shuffle onto numcodecs "shuffle", zlib onto numcodecs "zlib" (v3:
// "numcodecs.zlib", which zarrita and zarr-python 3 read), deflate onto
// zlib (v2) or gzip (v3), zstd onto zstd, lz4 onto numcodecs "lz4" (the
// same 4-byte length prefix), crc32c onto the v3 "crc32c" codec. When
// every stage maps, chunks are copied without decoding and re-encoding:
// zlib, zstd, lz4, shuffle, crc32c and unfiltered chunks byte for byte
// (scc's Zlib stage is numcodecs' zlib stream, Adler-32 included), raw
// deflate chunks with their compressed stream kept byte for byte inside
// the zlib or gzip wrapper, whose checksum is computed by inflating the
// stream once (the wrapper needs a checksum of the decoded bytes; scc's
// raw deflate stage has none; gzip's CRC-32 always needs that inflate).
// Otherwise (crc32c in v2, deflate or lz4 before another stage, a chunk
// for which scc skipped a compressor that did not shrink it) chunks are
// decoded and re-encoded, and the Report says so per dataset.
//
// Import does the reverse: zlib maps onto scc's Zlib and gzip onto raw
// Deflate (unwrapped after checking its CRC-32). Chunks of a [shuffle+]zlib
// array are stored as they are without being inflated at all
// (engine.Dataset.WriteChunkRawZlib: framing and size checked, the Adler-32
// checked on every later read and by the engine's Check; edge chunks are
// decoded once to check their padding; Options.Verify decodes every chunk
// first). Other mapped chunks are written raw with engine.Dataset.
// WriteChunkRaw, which verifies them by decoding; the rest are decoded and
// re-encoded. Fortran-order arrays (v2) and the v3 transpose codec are
// transposed into C order on the way. Blosc chunks (zarr-python 2's
// default) are decoded by the pure-Go decoder in internal/blosc and stored
// with the scc stages nearest to their frame. An array using what scc
// cannot hold (bz2, lzma, delta and other numcodecs filters, sharding
// inside sharding or a shard index of other codecs than bytes and crc32c;
// fixed-length unicode, variable-length strings, float16, structured
// types) is skipped and named in Report.Skipped.
//
// Sharding: a dataset whose chunks are sharded (engine.DatasetSpec.
// InnerChunk) exports in v3 as an array of the sharding_indexed codec
// (ZarrV3 "sharding"), the chunk being the shard: its inner codecs are the
// pipeline's chain followed by crc32c, its index codecs bytes and crc32c
// (the specification's default), the index at the end. Where the chain
// maps, a shard is the chunk's raw bytes (engine.Dataset.ReadChunkRaw's
// portable form: inner frames ending in their CRC32C) with only the index
// rewritten, so it is exactly as large as the stored chunk; a deflate
// stage is rewrapped per inner chunk and an inner chunk stored with a
// compressor skipped is re-encoded. In v2, which has no shards, the inner
// chunks are the chunks. Import reads sharding_indexed arrays (index at
// the start or the end, with or without its crc32c; the index bounded and
// checked before it is trusted) into sharded datasets, passing each inner
// chunk's bytes into the portable form where its codecs map (a last
// crc32c's checksum becomes the frame's own) and decoding the rest; a
// damaged inner chunk fails the import with ErrCorrupt naming the shard
// and the inner chunk.
//
// The store is read as hostile input (see store and the metadata
// decoders): metadata is checked against the specifications before it is
// trusted, every key resolves inside the store, only regular files are
// opened, and every read is bounded. Export is all or nothing: it writes
// into a temporary directory renamed into place once complete.
//
// Export and Import are safe to call concurrently on different files and
// directories; each runs its chunks on several goroutines.
package zarr

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/scc-dev/scc/internal/zarrmap"
)

var (
	// ErrUnsupported: the store or file uses something the other side
	// cannot represent (a data type, a codec, a name); nothing was written
	// for that dataset.
	ErrUnsupported = zarrmap.ErrUnsupported
	// ErrCorrupt: a Zarr chunk or metadata document does not decode, or
	// breaks the Zarr specification (a key of the wrong type, a chunk key
	// separator other than "." and "/", a fill value out of range).
	ErrCorrupt = zarrmap.ErrCorrupt
	// ErrUnsafe: a key of the store leads outside it (a ".." segment, an
	// absolute path, a symlink whose target leaves the store), or a file
	// changed while it was opened.
	ErrUnsafe = errors.New("zarr: key leads outside the store")
	// ErrNotRegular: a key names a FIFO, a device, a socket or a
	// directory where a file belongs; it is refused without being opened.
	ErrNotRegular = errors.New("zarr: not a regular file")
)

// Options configure Export and Import. The zero value exports Zarr v2 with
// one worker per CPU.
type Options struct {
	// Version is the Zarr format version to export: 2 (default) or 3.
	// Import reads both and ignores it.
	Version int
	// Workers is the number of chunks processed at once; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Verify makes Import decode every copied chunk once before storing
	// it, so a damaged chunk in the store fails the import (ErrCorrupt)
	// instead of the reads of that chunk. Off by default: [shuffle+]zlib
	// chunks are then stored without inflating them (the point of the
	// copy), and their Adler-32, which stays in the stream, is checked on
	// every read and by `scctl check`. Other copied chunks are always
	// verified. Export ignores it.
	Verify bool
	// FollowOutsideLinks lets Import follow symlinks in the store whose
	// targets leave it. By default such a link is refused with ErrUnsafe
	// (links that stay inside the store are followed).
	FollowOutsideLinks bool
	// Replace lets Export replace an existing Zarr store at its target
	// (a directory holding .zgroup, .zarray or zarr.json), in one rename
	// once the new store is complete.
	Replace bool
	// Strict makes a dataset or array that would be skipped fail the
	// whole Export or Import instead (ErrUnsupported or ErrCorrupt, naming
	// it); Export then leaves no store. By default it is left out and
	// named in Report.Skipped, and the rest crosses.
	Strict bool
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	if o.Version != 0 && o.Version != 2 && o.Version != 3 {
		return fmt.Errorf("%w: Zarr version %d (2 or 3)", ErrUnsupported, o.Version)
	}
	if o.Workers < 0 {
		return fmt.Errorf("%w: %d workers", ErrUnsupported, o.Workers)
	}
	return nil
}

func (o Options) version() int {
	if o.Version == 0 {
		return 2
	}
	return o.Version
}

func (o Options) workers() int {
	if o.Workers == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.Workers
}

// DatasetReport tells what happened to one dataset's chunks.
type DatasetReport struct {
	Name   string
	Chunks int // chunks written
	// Copied chunks went across with no decode and no re-encode.
	Copied int
	// Rewrapped chunks kept their compressed DEFLATE stream byte for byte
	// in another wrapper (scc's raw stream ↔ Zarr's zlib or gzip); the
	// wrapper's checksum was computed or verified by inflating the stream
	// once, with no re-compression.
	Rewrapped int
	// Reencoded chunks were decoded and encoded again.
	Reencoded int
	// Untouched counts the Copied chunks that were not decoded at all, not
	// even to verify them: export of any copied chunk, and import of a
	// [shuffle+]zlib chunk that is not an edge chunk (its Adler-32 stays in
	// the stream and is checked on every later read; see
	// engine.Dataset.WriteChunkRawZlib). Other copied imports are decoded
	// once by the engine to verify them.
	Untouched int
	// Codecs is the codec chain on the Zarr side, e.g. "shuffle,zlib(4)".
	Codecs string
	// Why says why chunks were re-encoded ("" when none were).
	Why   string
	Bytes int64 // decoded bytes of the chunks written
	// Notes lists what did not map and was left out (attributes with no
	// equivalent, group attributes below the root).
	Notes []string
}

// Skipped is an array Import left out, and why: one scc cannot hold
// (ErrUnsupported) or whose metadata breaks the specification
// (ErrCorrupt); or a dataset or group Export left out, one Zarr cannot
// hold (ErrUnsupported: a data type, a name).
type Skipped struct {
	Name, Reason string
	err          error
}

// Report is the outcome of an Export or Import.
type Report struct {
	Datasets []DatasetReport
	// Skipped lists the arrays Import could not hold (ErrUnsupported:
	// a data type, a codec, nested sharding) or read (ErrCorrupt: metadata that
	// breaks the specification, such as a fill value out of the data
	// type's range), each with its reason; the other arrays are imported.
	Skipped []Skipped
	Notes   []string
	export  bool
}

// Summary is one line per dataset, as scctl prints it.
func (r *Report) Summary() string {
	var b strings.Builder
	for _, d := range r.Datasets {
		fmt.Fprintf(&b, "%s: %d chunks [%s]: ", d.Name, d.Chunks, d.Codecs)
		switch {
		case d.Chunks == 0:
			b.WriteString("none stored")
		case d.Reencoded == 0 && d.Rewrapped == 0:
			b.WriteString("all copied without re-encoding")
			if d.Untouched > 0 {
				fmt.Fprintf(&b, " (%d not decoded at all)", d.Untouched)
			}
		case d.Reencoded == 0:
			fmt.Fprintf(&b, "all copied without re-encoding (%d deflate streams kept byte for byte, zlib/gzip wrapper checksummed)", d.Rewrapped)
		default:
			fmt.Fprintf(&b, "RE-ENCODED %d of %d (%s)", d.Reencoded, d.Chunks, d.Why)
		}
		b.WriteByte('\n')
		for _, n := range d.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	for _, sk := range r.Skipped {
		// Quoted when it holds what would garble the line (a newline,
		// an escape, bytes that are not UTF-8).
		name := sk.Name
		if strings.ContainsFunc(name, func(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) }) {
			name = strconv.Quote(name)
		}
		fmt.Fprintf(&b, "SKIPPED %s: %s\n", name, sk.Reason)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if len(r.Skipped) > 0 {
		verb := "imported"
		if r.export {
			verb = "exported"
		}
		fmt.Fprintf(&b, "%d %s, %d skipped\n", len(r.Datasets), verb, len(r.Skipped))
	}
	return b.String()
}

// chainString names an imported chain for the report, as
// zarrmap.ChainString names an exported one.
func chainString(chain []codec) string {
	shared := make([]zarrmap.Codec, len(chain))
	for i, c := range chain {
		shared[i] = c.shared()
	}
	return zarrmap.ChainString(shared)
}
