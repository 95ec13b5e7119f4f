// Package hdf5 moves datasets between scc files and HDF5 files through the
// HDF5 C library (a thin cgo binding in internal/h5). It lives in its own Go
// module so that the scc engine module stays pure Go and builds with
// CGO_ENABLED=0; building this module needs libhdf5-dev (pkg-config hdf5).
//
// Export writes every chunked dataset of an scc file as a chunked HDF5
// dataset of the same type (little-endian), extent, chunk shape and fill
// value, with unlimited dimensions as H5S_UNLIMITED maximum dimensions at
// the current extent. Contiguous, variable-length and sparse datasets are
// written through their values (export_values.go: contiguous as HDF5
// contiguous, variable-length as HDF5 vlen sequences of the element type,
// vlen of uint8 for bytes, variable-length strings for text marked by
// VlenStringAttr (import_vlen.go; Import maps HDF5's variable-length
// strings and sequences back onto scc's variable-length layout), sparse as chunked with the fill value
// and the defined set in a companion boolean dataset). Virtual datasets
// become HDF5 virtual datasets over the sources exported beside them:
// sources in other scc files are exported as HDF5 files beside the output
// under the mapping's relative name with ".scc" replaced by ".h5" ("w0.scc"
// beside the virtual file becomes "w0.h5" beside the output; see
// Options.SkipSources), %b names become HDF5 printf mappings and unlimited
// mappings stay unlimited (export_virtual.go says which mappings it takes;
// the others, such as s3:// sources, are refused with ErrUnsupported
// naming the mapping). Bool is h5py's boolean (an
// int8 enum FALSE=0, TRUE=1), Complex64 and Complex128 are h5py's complex
// (a compound {r, i}), fixed-length strings are HDF5 fixed-length strings
// with the same padding and character set; Import maps each back. Import
// brings the datasets of an HDF5 file (chunked, contiguous or
// compact; nested groups are flattened to '/'-separated scc dataset names,
// "grp/sub/x") into an scc file.
//
// Chunks move without a decode and re-encode wherever the two filter
// pipelines agree. scc's shuffle is HDF5's shuffle byte for byte, scc's
// Zlib filter stores exactly HDF5's deflate stream (zlib, RFC 1950), and a
// chunk's filter mask means the same in both (bit i: filter i skipped), so
// shuffle/zlib chunks are copied untouched both ways: HDF5 deflate imports
// as scc Zlib, and a [shuffle+]deflate chunk is stored without inflating it
// (engine.Dataset.WriteChunkRawZlib; its Adler-32 is checked on every later
// read; Options.Verify decodes first). scc's older Deflate filter writes
// raw DEFLATE (RFC 1951), so those chunks are rewrapped on export: each is
// inflated once to compute the Adler-32 (no compression runs). Pipelines
// with no HDF5 counterpart in libhdf5 (zstd, LZ4, CRC32C) are decoded and
// re-encoded to shuffle+deflate, and the report says so. On import,
// HDF5's zstd chunks (filter 32015, one Zstandard frame) are copied as scc
// Zstd chunks and one-block LZ4 chunks (filter 32004) as scc LZ4 chunks
// with only their framing changed (lz4.go), neither decoded here; chunks
// of filters scc does not have (Bitshuffle, Blosc, BZip2, LZF, ZFP, ...)
// are decoded by libhdf5's filter plugins (internal/h5/plugins.go: the
// search path, and why the binding registers the plugins itself) and
// re-encoded. Edge chunks are
// whole chunks in both formats (HDF5 stores full-size edge chunks), so
// they copy like any other (import decodes them once to check that their
// padding is the fill value, as scc keeps it).
//
// Attributes of the file (the root group) and of each dataset cross both
// ways (attrs.go has the mapping); Import's report lists the HDF5
// attributes it could not map, with the reason, so nothing is dropped
// silently.
//
// Concurrency: Export and Import may run at once with each other and with
// other users of the scc files; calls into libhdf5 are serialized process-
// wide (see internal/h5), and the per-chunk work (scc chunk I/O, inflate,
// Adler-32, re-encoding) runs on Options.Workers goroutines beside them.
package hdf5

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// ErrHDF5 is wrapped by errors the HDF5 library reported.
var ErrHDF5 = h5.ErrHDF5

// ErrUnsupported reports a dataset that cannot be mapped (an HDF5 type scc
// has no counterpart for, a chunk shape HDF5 or scc refuses, ...). Nothing
// is written for it.
var ErrUnsupported = errors.New("hdf5: unsupported")

// Mode says how a dataset's chunks were moved.
type Mode string

const (
	// Raw: every stored chunk was copied byte for byte (pipelines of
	// shuffle and zlib: scc's Zlib filter stores HDF5's deflate stream).
	Raw Mode = "raw"
	// Rewrapped: the compressed streams were copied with only their
	// framing changed. On export, scc's raw Deflate chunks get the zlib
	// wrapper, which costs one inflate per chunk for the Adler-32 (HDF5's
	// deflate imports as scc's Zlib, unchanged); on import, HDF5's
	// one-block LZ4 chunks get scc's LZ4 length prefix.
	Rewrapped Mode = "rewrapped"
	// Reencoded: chunks were decoded and encoded again, because the
	// pipelines differ (Reason says why).
	Reencoded Mode = "re-encoded"
	// Virtual: an HDF5 virtual dataset of the same mappings was written;
	// the elements stay in the sources.
	Virtual Mode = "virtual"
)

// DatasetReport describes what happened to one dataset.
type DatasetReport struct {
	Name   string // the scc dataset name
	Path   string // the HDF5 path (Import), the scc name (Export)
	Mode   Mode
	Reason string // why re-encoded; empty otherwise
	// Chunks is the number of stored chunks moved; CopiedChunks those moved
	// without re-encoding (some chunks of a raw dataset may still need it,
	// e.g. an HDF5 chunk whose deflate did not shrink it).
	Chunks, CopiedChunks int
	// UntouchedChunks counts the copied chunks that were not decoded at
	// all, not even to verify them: every chunk a Raw export copies, and
	// on import every [shuffle+]deflate chunk that is not an edge chunk
	// (engine.Dataset.WriteChunkRawZlib: its Adler-32 stays in the stream
	// and is checked on every read). Other copied imports are decoded once
	// by the engine to verify them.
	UntouchedChunks int
	// StoredBytes is the encoded size of the chunks written to the
	// destination; LogicalBytes is the elements they cover (whole chunks).
	StoredBytes, LogicalBytes int64
	// AttrsNotImported counts the HDF5 attributes of the dataset that
	// Import could not map (see attrs.go); AttrNotes says which and why,
	// one "name: reason" each.
	AttrsNotImported int
	AttrNotes        []string
}

// SkippedDataset is a dataset (or group: Reason starts "group: ") Import
// or Export left out, and why.
type SkippedDataset struct {
	Path   string // the HDF5 path (Import), the scc name (Export)
	Reason string
}

// Report lists one DatasetReport per dataset, in the order moved.
type Report struct {
	Datasets []DatasetReport
	// Sources lists the source files of virtual datasets Export wrote
	// beside the output (see Options.SkipSources).
	Sources []SourceFile
	// Skipped lists the datasets and groups Import or Export left out
	// (see Import and Export).
	Skipped []SkippedDataset
	// RootAttrsNotImported counts the attributes of the HDF5 file's root
	// group that Import could not map; RootAttrNotes says which and why.
	RootAttrsNotImported int
	RootAttrNotes        []string
	// GroupAttrNotes names the attributes of other groups that Import
	// could not map ("/path: name: why").
	GroupAttrNotes []string
	Elapsed        time.Duration
}

// LogicalBytes sums the datasets' logical bytes.
func (r Report) LogicalBytes() int64 {
	var n int64
	for _, d := range r.Datasets {
		n += d.LogicalBytes
	}
	return n
}

// String is a table, one line per dataset.
func (r Report) String() string {
	var b strings.Builder
	for _, d := range r.Datasets {
		fmt.Fprintf(&b, "%-24s %-10s chunks %d (copied %d, %d not decoded at all), %d stored / %d logical bytes", d.Name, d.Mode, d.Chunks, d.CopiedChunks, d.UntouchedChunks, d.StoredBytes, d.LogicalBytes)
		if d.Reason != "" {
			fmt.Fprintf(&b, " — %s", d.Reason)
		}
		if d.AttrsNotImported > 0 {
			fmt.Fprintf(&b, " (%d attributes not imported)", d.AttrsNotImported)
		}
		b.WriteByte('\n')
		for _, n := range d.AttrNotes {
			fmt.Fprintf(&b, "  attribute not imported: %s\n", n)
		}
	}
	for _, s := range r.Sources {
		fmt.Fprintf(&b, "source file %s written as %s\n", s.Source, s.Path)
	}
	for _, s := range r.Skipped {
		// Quoted when it holds what would garble the line (a newline,
		// an escape, bytes that are not UTF-8).
		p := s.Path
		if strings.ContainsFunc(p, func(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) }) {
			p = strconv.Quote(p)
		}
		fmt.Fprintf(&b, "%-24s skipped: %s\n", p, s.Reason)
	}
	if r.RootAttrsNotImported > 0 {
		fmt.Fprintf(&b, "(%d attributes of the root group not imported)\n", r.RootAttrsNotImported)
		for _, n := range r.RootAttrNotes {
			fmt.Fprintf(&b, "  attribute not imported: %s\n", n)
		}
	}
	for _, n := range r.GroupAttrNotes {
		fmt.Fprintf(&b, "group attribute not imported: %s\n", n)
	}
	return b.String()
}

// Options are shared by Export and Import.
type Options struct {
	// Datasets restricts the move to these names (scc names for Export,
	// HDF5 paths without the leading '/' for Import); nil moves all.
	Datasets []string
	// Workers is how many goroutines do per-chunk work beside the HDF5
	// calls. Default (0): GOMAXPROCS.
	Workers int
	// DeflateLevel is the deflate level used where chunks are re-encoded
	// (1..9). Default (0): 1.
	DeflateLevel int
	// Chunk is the scc chunk shape for HDF5 datasets that are not chunked
	// (Import only); nil picks whole rows of about 1 MiB.
	Chunk []uint64
	// Filters is the scc pipeline for imported datasets whose HDF5 filters
	// scc cannot copy raw, and for contiguous ones (Import only). Default
	// (nil): shuffle + zlib(DeflateLevel), which exports back to HDF5
	// without inflating.
	Filters []engine.Filter
	// Verify makes Import decode every copied chunk once before storing
	// it, so a damaged chunk in the HDF5 file fails the import instead of
	// the reads of that chunk. Off by default: deflate chunks are then
	// stored without inflating them, and their Adler-32, which stays in
	// the stream, is checked on every read and by `scctl check`.
	Verify bool
	// Strict makes Import fail, with nothing imported, when it would skip
	// a dataset (see Import), and Export fail, with nothing written, when
	// it would skip one for its name (see Export); by default they move
	// the others and list the skipped ones in Report.Skipped.
	Strict bool
	// Replace lets ImportFile and Export replace an existing destination
	// file; without it they refuse one (engine.ErrExists). The
	// replacement is whole: nothing of the old file is kept.
	Replace bool
	// SkipSources leaves out the scc files that virtual datasets map
	// (Export only). By default each is exported too, as an HDF5 file
	// beside the output under the name the mapping gives it relative to
	// the virtual file, with ".scc" replaced by ".h5" (".h5" appended to
	// a name without ".scc"): source "w0.scc" of a virtual file becomes
	// "w0.h5" beside the output, "run/w%b.scc" becomes "run/w%b.h5" (every
	// block file that exists within the virtual extent), and an absolute
	// "/data/w0.scc" becomes "w0.h5". The HDF5 mapping names that
	// relative name, which libhdf5 resolves against the directory of the
	// HDF5 file (unless HDF5_VDS_PREFIX or the access property list's
	// virtual prefix says otherwise). With SkipSources the mappings still
	// name them; export them separately under those names.
	SkipSources bool
}

// Validate checks the options; zero values are valid defaults.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.Workers < 0 {
		return fmt.Errorf("%w: workers %d", engine.ErrInvalid, o.Workers)
	}
	if o.DeflateLevel != 0 && (o.DeflateLevel < 1 || o.DeflateLevel > 9) {
		return fmt.Errorf("%w: deflate level %d not in [1, 9]", engine.ErrInvalid, o.DeflateLevel)
	}
	for _, c := range o.Chunk {
		if c == 0 {
			return fmt.Errorf("%w: chunk %v has a zero dimension", engine.ErrInvalid, o.Chunk)
		}
	}
	return nil
}

func (o *Options) workers() int {
	if o == nil || o.Workers == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.Workers
}

func (o *Options) level() int {
	if o == nil || o.DeflateLevel == 0 {
		return 1
	}
	return o.DeflateLevel
}

func (o *Options) skipSources() bool { return o != nil && o.SkipSources }

func (o *Options) selected(name string) bool {
	if o == nil || o.Datasets == nil {
		return true
	}
	for _, n := range o.Datasets {
		if n == name {
			return true
		}
	}
	return false
}

// h5Maps reports whether h5Type maps t: every valid scc type has an HDF5
// type (the described ones theirs, recursively) but an enum without
// members, anywhere in it, which libhdf5 1.10 cannot take (it crashes
// inserting one into a compound).
func h5Maps(t engine.Type) bool {
	switch t.Class() {
	case engine.ClassInvalid:
		return false
	case engine.ClassEnum:
		return len(t.Members()) > 0
	case engine.ClassArray:
		return h5Maps(t.Base())
	case engine.ClassCompound:
		for _, f := range t.Fields() {
			if !h5Maps(f.Type) {
				return false
			}
		}
	}
	return true
}

// h5Type maps an scc element type onto the binding's: the numeric types
// onto HDF5's little-endian integers and IEEE floats (Float16 onto the
// 16-bit IEEE float h5py writes for numpy's float16, BFloat16 onto a
// 16-bit float of bfloat16's fields), Bool onto h5py's boolean (an int8
// enum FALSE=0, TRUE=1), Complex64 and Complex128 onto h5py's complex (a
// compound {r, i} of two little-endian floats), a fixed-length string
// onto an HDF5 fixed-length string of the same length, padding and
// character set, and the described types onto HDF5's classes of the same
// name (H5T_ENUM over the base integer with the same names and values,
// H5T_OPAQUE with the tag, H5T_BITFIELD, H5T_ARRAY, H5T_COMPOUND with
// the same member names, offsets and size). All have scc's byte layout,
// so chunk images copy between the two formats unchanged.
func h5Type(t engine.Type) h5.Type {
	switch t.Class() {
	case engine.ClassInteger:
		if t >= engine.Uint8 {
			return h5.Type{Class: h5.Uint, Size: t.Size()}
		}
		return h5.Type{Class: h5.Int, Size: t.Size()}
	case engine.ClassBool:
		return h5.Type{Class: h5.Bool, Size: 1}
	case engine.ClassComplex:
		return h5.Type{Class: h5.Complex, Size: t.Size()}
	case engine.ClassString:
		pad := map[engine.StrPad]int{engine.NullTerm: h5.PadNullTerm, engine.NullPad: h5.PadNullPad, engine.SpacePad: h5.PadSpacePad}[t.Pad()]
		return h5.Type{Class: h5.String, Size: t.Size(), Pad: pad, UTF8: t.Charset() == engine.UTF8}
	case engine.ClassEnum:
		base := h5Type(t.Base())
		ht := h5.Type{Class: h5.Enum, Size: t.Size(), Base: &base}
		for _, m := range t.Members() {
			ht.Names, ht.Values = append(ht.Names, m.Name), append(ht.Values, m.Value)
		}
		return ht
	case engine.ClassOpaque:
		return h5.Type{Class: h5.Opaque, Size: t.Size(), Tag: t.Tag()}
	case engine.ClassBitfield:
		return h5.Type{Class: h5.Bitfield, Size: t.Size()}
	case engine.ClassArray:
		base := h5Type(t.Base())
		return h5.Type{Class: h5.Array, Size: t.Size(), Base: &base, Dims: t.Dims()}
	case engine.ClassCompound:
		ht := h5.Type{Class: h5.Compound, Size: t.Size()}
		for _, f := range t.Fields() {
			ht.Members = append(ht.Members, h5.Member{Name: f.Name, Offset: f.Offset, Type: h5Type(f.Type)})
		}
		return ht
	}
	return h5.Type{Class: h5.Float, Size: t.Size(), BFloat: t == engine.BFloat16}
}

// sccType maps an HDF5 type onto scc's (byte order aside): for a
// variable-length one, the element type of the scc variable-length
// dataset (Uint8 for strings, which hold their bytes). A described type
// scc refuses (engine.Enum, Compound... give an invalid type: a compound
// whose members overlap, an enum with repeated names or values, a name
// with NUL) is not mapped.
func sccType(t h5.Type) (engine.Type, bool) {
	if t.Class == h5.ObjRef {
		return engine.Uint8, true // the paths' bytes (import_vlen.go)
	}
	if t.Vlen {
		if t.Class == h5.String {
			return engine.Uint8, true
		}
		t.Vlen = false
	}
	var st engine.Type
	switch t.Class {
	case h5.String:
		pad := map[int]engine.StrPad{h5.PadNullTerm: engine.NullTerm, h5.PadNullPad: engine.NullPad, h5.PadSpacePad: engine.SpacePad}[t.Pad]
		cs := engine.ASCII
		if t.UTF8 {
			cs = engine.UTF8
		}
		st = engine.FixedString(t.Size, pad, cs)
	case h5.Float:
		switch {
		case t.Size == 2 && t.BFloat:
			st = engine.BFloat16
		case t.Size == 2:
			st = engine.Float16
		case t.Size == 4:
			st = engine.Float32
		case t.Size == 8:
			st = engine.Float64
		}
	case h5.Enum:
		base, ok := sccType(*t.Base)
		if !ok || len(t.Names) != len(t.Values) {
			return 0, false
		}
		ms := make([]engine.EnumMember, len(t.Names))
		for i, n := range t.Names {
			ms[i] = engine.EnumMember{Name: n, Value: t.Values[i]}
		}
		st = engine.Enum(base, ms...)
	case h5.Opaque:
		st = engine.Opaque(t.Size, t.Tag)
	case h5.Bitfield:
		st = engine.Bitfield(t.Size)
	case h5.Array:
		base, ok := sccType(*t.Base)
		if !ok {
			return 0, false
		}
		st = engine.ArrayOf(base, t.Dims...)
	case h5.Compound:
		fs := make([]engine.Field, len(t.Members))
		for i, m := range t.Members {
			ft, ok := sccType(m.Type)
			if !ok {
				return 0, false
			}
			fs[i] = engine.Field{Name: m.Name, Offset: m.Offset, Type: ft}
		}
		st = engine.Compound(t.Size, fs...)
	case h5.Int, h5.Uint, h5.Bool, h5.Complex:
		for _, et := range engine.Types {
			if ht := h5Type(et); ht.Class == t.Class && ht.Size == t.Size {
				st = et
			}
		}
	}
	return st, st.Valid() && st.Size() == t.Size
}

// forEachCoord calls fn with every coordinate of grid in C order.
func forEachCoord(grid []uint64, fn func([]uint64) bool) {
	for _, g := range grid {
		if g == 0 {
			return
		}
	}
	cur := make([]uint64, len(grid))
	for {
		if !fn(append([]uint64(nil), cur...)) {
			return
		}
		d := len(grid) - 1
		for ; d >= 0; d-- {
			cur[d]++
			if cur[d] < grid[d] {
				break
			}
			cur[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

func (o *Options) verify() bool { return o != nil && o.Verify }

func (o *Options) strict() bool { return o != nil && o.Strict }

func (o *Options) replace() bool { return o != nil && o.Replace }
