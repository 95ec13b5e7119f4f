// Package h5 is a minimal cgo binding over the HDF5 C library (Debian's
// libhdf5-dev, serial build): files, datasets with a chunked or contiguous
// layout, simple, scalar and null dataspaces (unlimited maximum
// dimensions), the integer and float types (16-bit ones included), enums,
// opaque types, bitfields, arrays and compounds (types.go), fill values,
// the shuffle and
// deflate filters, direct chunk I/O (H5Dread_chunk, H5Dwrite_chunk,
// H5Dget_chunk_info_by_coord, all present since HDF5 1.10.5; Debian 12
// ships 1.10.8) and plain hyperslab reads and writes.
//
// Concurrency: every call into the library runs under one process-wide
// mutex, with the goroutine locked to its OS thread. A libhdf5 built
// without --enable-threadsafe must never be entered by two threads at once;
// Debian 12's serial build is configured thread-safe (H5_HAVE_THREADSAFE),
// which means one global lock inside the library and an error stack per
// thread. Holding our mutex keeps the binding correct on either build and
// makes each multi-call sequence (an operation and the walk of the error
// stack it left, on the same thread) atomic; it costs nothing HDF5 would
// not serialize anyway. Handles (File, Dataset) are safe for
// concurrent use in that sense, but calls on them never run in parallel:
// callers that want parallelism do their own work (compression, checksums,
// scc I/O) outside these calls.
package h5

/*
#cgo pkg-config: hdf5
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// lib serializes every call into libhdf5 (see the package comment).
var lib sync.Mutex

// lock takes lib and pins the goroutine to its OS thread until unlock: a
// thread-safe libhdf5 keeps the error stack per thread, so the call that
// failed and the walk of its error stack must run on the same thread.
func lock() {
	runtime.LockOSThread()
	lib.Lock()
	C.scc_quiet()
	pluginsOnce.Do(addPluginDirs)
}

func unlock() {
	lib.Unlock()
	runtime.UnlockOSThread()
}

// Unlimited is H5S_UNLIMITED, the maximum dimension of a growable axis.
var Unlimited = uint64(C.scc_unlimited())

// ErrHDF5 is wrapped by every error the library reports.
var ErrHDF5 = errors.New("hdf5")

// ErrName is a name the C API cannot be given: one holding NUL, where
// the library would end it and act on another object ("a\x00b" as "a").
var ErrName = errors.New("hdf5: name holds NUL")

// cName is name as a C string for the library, which the caller frees;
// refused when it holds NUL.
func cName(what, name string) (*C.char, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return nil, fmt.Errorf("%w: %s %q", ErrName, what, name)
	}
	return C.CString(name), nil
}

// ErrFilter is wrapped, beside ErrHDF5, by an error of the filter
// pipeline: a chunk that a filter (its plugin, or a filter this library
// does not have) could not decode. An error that went through file I/O
// never wraps it.
var ErrFilter = errors.New("hdf5: filter pipeline")

// errorf builds an error from the library's error stack. Caller holds lib.
func errorf(op string, args ...any) error {
	var pline C.int
	cs := C.scc_error_string(&pline)
	msg := ""
	if cs != nil {
		msg = C.GoString(cs)
		C.free(unsafe.Pointer(cs))
	}
	if msg == "" {
		msg = "failed"
	}
	if pline != 0 {
		return fmt.Errorf("%w: %s: %s%w", ErrHDF5, fmt.Sprintf(op, args...), msg, filterMark)
	}
	return fmt.Errorf("%w: %s: %s", ErrHDF5, fmt.Sprintf(op, args...), msg)
}

// filterMark wraps ErrFilter without adding to the message.
var filterMark = markErr{ErrFilter}

type markErr struct{ err error }

func (m markErr) Error() string { return "" }
func (m markErr) Unwrap() error { return m.err }

// Class is an element type's class.
type Class int

const (
	Int   Class = 0
	Uint  Class = 1
	Float Class = 2
	Other Class = 3 // compounds, references, ...: not mapped
	// Bool is h5py's boolean: an enum of int8 with FALSE=0 and TRUE=1.
	Bool Class = 4
	// Complex is h5py's complex: a compound {r, i} of two IEEE floats of
	// Size/2 bytes each.
	Complex Class = 5
	// String is a fixed-length string of Size bytes (Pad, UTF8).
	String Class = 6
	// ObjRef is an object reference (H5T_STD_REF_OBJ): read as the
	// referenced object's path (Dataset.ReadObjRefs).
	ObjRef Class = 7
	// The described classes (types.go): an enum of Base with Names and
	// Values, an opaque type of Size bytes with Tag, a bitfield of Size
	// bytes, an array of Base with Dims, a compound of Members.
	Enum     Class = 8
	Opaque   Class = 9
	Bitfield Class = 10
	Array    Class = 11
	Compound Class = 12
)

// String padding (H5T_str_t).
const (
	PadNullTerm = 0
	PadNullPad  = 1
	PadSpacePad = 2
)

// Type describes an element type.
type Type struct {
	Class     Class
	Size      int
	BigEndian bool
	// Pad (H5T_str_t) and UTF8 (else ASCII): a String's.
	Pad  int
	UTF8 bool
	// Vlen: each element is a variable-length sequence of the type the
	// other fields describe (Class Int, Uint, Float, Bool or Complex), or
	// for Class String a variable-length string (Size 1, UTF8).
	Vlen bool
	// Name says what an Other type is ("compound", "enum", "string",
	// "reference", "non-IEEE float", ...), so that a refusal names it.
	Name string
	// BFloat: a Float of Size 2 is bfloat16 (else IEEE binary16).
	BFloat bool
	// Base is an Enum's integer type or an Array's element type.
	Base *Type
	// Names and Values are an Enum's members; a value is the member's
	// bits as the base type holds them (sign-extended when signed).
	Names  []string
	Values []int64
	// Tag is an Opaque type's tag ("" untagged).
	Tag string
	// Dims are an Array's dimensions.
	Dims []int
	// Members are a Compound's fields in their order.
	Members []Member
}

// Member is one field of a Compound: its name, byte offset and type.
type Member struct {
	Name   string
	Offset int
	Type   Type
}

func (t Type) String() string {
	if t.Vlen && t.Class != String {
		b := t
		b.Vlen = false
		return "variable-length sequence of " + b.String()
	}
	end := " little-endian"
	if t.BigEndian {
		end = " big-endian"
	}
	if t.Size == 1 {
		end = ""
	}
	switch t.Class {
	case Int:
		return fmt.Sprintf("int%d%s", 8*t.Size, end)
	case Uint:
		return fmt.Sprintf("uint%d%s", 8*t.Size, end)
	case Float:
		if t.Size == 2 && t.BFloat {
			return "bfloat16" + end
		}
		return fmt.Sprintf("float%d%s", 8*t.Size, end)
	case Bool:
		return "bool (int8 enum)"
	case Complex:
		return fmt.Sprintf("complex%d%s", 8*t.Size, end)
	case ObjRef:
		return "object reference"
	case Enum, Opaque, Bitfield, Array, Compound:
		return t.describedString()
	case String:
		cs := "ascii"
		if t.UTF8 {
			cs = "utf-8"
		}
		if t.Vlen {
			return fmt.Sprintf("variable-length string (%s)", cs)
		}
		return fmt.Sprintf("string of %d bytes (%s, pad %d)", t.Size, cs, t.Pad)
	}
	if t.Name != "" {
		return fmt.Sprintf("%s (%d bytes)", t.Name, t.Size)
	}
	return fmt.Sprintf("unsupported (%d bytes)", t.Size)
}

// className names an HDF5 type class that the binding does not map.
func className(cls C.H5T_class_t) string {
	switch cls {
	case C.H5T_STRING:
		return "string"
	case C.H5T_COMPOUND:
		return "compound"
	case C.H5T_ENUM:
		return "enum"
	case C.H5T_REFERENCE:
		return "reference"
	case C.H5T_OPAQUE:
		return "opaque"
	case C.H5T_BITFIELD:
		return "bitfield"
	case C.H5T_VLEN:
		return "variable-length sequence"
	case C.H5T_ARRAY:
		return "array"
	case C.H5T_TIME:
		return "time"
	}
	return fmt.Sprintf("type class %d", int(cls))
}

// leType returns the predefined little-endian type of t's class and size.
func leType(t Type) (C.hid_t, error) {
	id := C.scc_le_type(C.int(t.Class), C.size_t(t.Size))
	if id < 0 {
		return -1, fmt.Errorf("%w: no little-endian type for %v", ErrHDF5, t)
	}
	return id, nil
}

// makeType returns a new HDF5 type for t (a variable-length sequence of t
// when vlen), little-endian; the caller closes it. Caller holds lib.
func makeType(t Type, vlen bool) (C.hid_t, error) {
	if t.BigEndian || t.Class == Other {
		return -1, fmt.Errorf("%w: no type for %v", ErrHDF5, t)
	}
	if t.Class >= Enum || t.Class == Float && t.Size == 2 {
		id, err := makeDescribed(t, 0)
		if err != nil || !(vlen || t.Vlen) {
			return id, err
		}
		v := C.H5Tvlen_create(id)
		C.H5Tclose(id)
		if v < 0 {
			return -1, errorf("type %v", t)
		}
		return v, nil
	}
	utf8 := 0
	if t.UTF8 {
		utf8 = 1
	}
	v := 0
	if vlen || t.Vlen {
		v = 1
	}
	if t.Class == String && t.Vlen {
		id := C.scc_vlen_str(C.int(utf8))
		if id < 0 {
			return -1, errorf("type %v", t)
		}
		return id, nil
	}
	id := C.scc_make_type(C.int(t.Class), C.size_t(t.Size), C.int(t.Pad), C.int(utf8), C.int(v))
	if id < 0 {
		return -1, errorf("type %v", t)
	}
	return id, nil
}

// Filter IDs (H5Zpublic.h).
const (
	FilterDeflate    = 1
	FilterShuffle    = 2
	FilterFletcher32 = 3
	FilterSzip       = 4
	FilterNbit       = 5
	FilterScaleOff   = 6
	// Registered third-party filters (HDF5's filter registry), decoded by
	// plugins.
	FilterLZ4  = 32004
	FilterZstd = 32015
)

// Filter is one stage of a dataset's pipeline. Level is deflate's level
// (and, read side, zstd's: its first client value).
type Filter struct {
	ID    int
	Level int
	Name  string // as the file records it (read side only)
	// Params are the filter's client data values as the file records
	// them (read side only; at most 8 are read).
	Params []uint
	// Read side only: Available says this libhdf5 can decode the filter
	// (built in or a plugin it found); Optional is H5Z_FLAG_OPTIONAL.
	Available, Optional bool
}

// File is an open HDF5 file.
type File struct{ id C.hid_t }

// Create creates path, which must not exist (H5F_ACC_EXCL).
func Create(path string) (*File, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	lock()
	defer unlock()
	id := C.H5Fcreate(cs, C.H5F_ACC_EXCL, C.H5P_DEFAULT, C.H5P_DEFAULT)
	if id < 0 {
		return nil, errorf("create %s", path)
	}
	return &File{id: id}, nil
}

// Open opens path read-only.
func Open(path string) (*File, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	lock()
	defer unlock()
	if C.H5Fis_hdf5(cs) <= 0 {
		C.H5Eclear2(C.H5E_DEFAULT)
		return nil, fmt.Errorf("%w: %s is not an HDF5 file", ErrHDF5, path)
	}
	id := C.H5Fopen(cs, C.H5F_ACC_RDONLY, C.H5P_DEFAULT)
	if id < 0 {
		return nil, errorf("open %s", path)
	}
	return &File{id: id}, nil
}

// Close closes the file (and, with H5F_CLOSE_DEFAULT's weak degree, only
// once every dataset handle is closed). Idempotent.
func (f *File) Close() error {
	lock()
	defer unlock()
	if f.id < 0 {
		return nil
	}
	rc := C.H5Fclose(f.id)
	f.id = -1
	if rc < 0 {
		return errorf("close")
	}
	return nil
}

// Datasets lists the path of every dataset reachable by hard links, without
// the leading '/', in HDF5's name order.
func (f *File) Datasets() ([]string, error) {
	ds, _, err := f.list(false)
	return ds, err
}

// Objects is Datasets, and the paths of the objects whose headers could
// not be read (neither a dataset nor a group as far as the file says):
// ObjectError tells why.
func (f *File) Objects() (datasets, unreadable []string, err error) { return f.list(false) }

// Groups lists the path of every group below the root reachable by hard
// links, without the leading '/', parents before their children.
func (f *File) Groups() ([]string, error) {
	gs, _, err := f.list(true)
	return gs, err
}

// ObjectError is the library's error reading the header of the object at
// path, or nil.
func (f *File) ObjectError(path string) error {
	lock()
	defer unlock()
	cs, err := cName("object", path)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cs))
	if C.scc_object_info(f.id, cs) < 0 {
		return errorf("object %q", path)
	}
	return nil
}

func (f *File) list(groups bool) (names, unreadable []string, err error) {
	lock()
	defer unlock()
	var buf, bad *C.char
	var n, nbad C.size_t
	var rc C.herr_t
	if groups {
		rc = C.scc_list_groups(f.id, &buf, &n, &bad, &nbad)
	} else {
		rc = C.scc_list_datasets(f.id, &buf, &n, &bad, &nbad)
	}
	if buf != nil {
		defer C.free(unsafe.Pointer(buf))
	}
	if bad != nil {
		defer C.free(unsafe.Pointer(bad))
	}
	if rc < 0 {
		return nil, nil, errorf("list objects")
	}
	return splitNUL(C.GoBytes(unsafe.Pointer(buf), C.int(n))), splitNUL(C.GoBytes(unsafe.Pointer(bad), C.int(nbad))), nil
}

// splitNUL splits NUL-terminated names.
func splitNUL(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		out = append(out, string(b[:i]))
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

// Spec describes a dataset to create.
type Spec struct {
	Type Type // little-endian
	// Space "scalar" or "null" makes a scalar (H5S_SCALAR) or null
	// (H5S_NULL) dataset: no Dims, MaxDims, Chunk, Filters or Virtual;
	// its layout is contiguous. "" is a simple dataspace.
	Space string
	// Vlen makes every element a variable-length sequence of Type.
	Vlen bool
	// Contiguous makes a contiguous dataset: MaxDims must be Dims, and
	// Chunk and Filters empty.
	Contiguous bool
	// Virtual makes a virtual dataset (VDS) of these mappings: Chunk and
	// Filters must be empty.
	Virtual []VirtualMap
	Dims    []uint64
	MaxDims []uint64 // Unlimited for growable axes
	Chunk   []uint64
	Fill    []byte // one element, or nil for HDF5's default (zero)
	Filters []Filter
}

// Slab is a hyperslab: start, stride, count and block per dimension.
type Slab struct{ Start, Stride, Count, Block []uint64 }

// VirtualMap maps the hyperslab Virtual of a virtual dataset to the
// hyperslab Source of the dataset Dataset (of extent SourceDims) in File
// ("." for the virtual dataset's own file).
type VirtualMap struct {
	Virtual    Slab
	File       string
	Dataset    string
	SourceDims []uint64
	Source     Slab
}

// selectSlab selects sl in space. Caller holds lib.
func selectSlab(space C.hid_t, sl Slab) error {
	if C.H5Sselect_hyperslab(space, C.H5S_SELECT_SET, hsize(sl.Start), hsize(sl.Stride), hsize(sl.Count), hsize(sl.Block)) < 0 {
		return errorf("select %v", sl)
	}
	return nil
}

// setVirtual adds s's mappings to dcpl. Caller holds lib.
func setVirtual(dcpl, space C.hid_t, s Spec) error {
	for _, m := range s.Virtual {
		r := len(s.Dims)
		if len(m.Virtual.Start) != r || len(m.Virtual.Stride) != r || len(m.Virtual.Count) != r || len(m.Virtual.Block) != r {
			return fmt.Errorf("%w: virtual selection rank", ErrHDF5)
		}
		sr := len(m.SourceDims)
		if sr == 0 || len(m.Source.Start) != sr || len(m.Source.Stride) != sr || len(m.Source.Count) != sr || len(m.Source.Block) != sr {
			return fmt.Errorf("%w: source selection rank", ErrHDF5)
		}
		vs := C.H5Scopy(space)
		if vs < 0 {
			return errorf("virtual dataspace")
		}
		ss := C.H5Screate_simple(C.int(sr), hsize(m.SourceDims), nil)
		if ss < 0 {
			C.H5Sclose(vs)
			return errorf("source dataspace %v", m.SourceDims)
		}
		err := selectSlab(vs, m.Virtual)
		if err == nil {
			err = selectSlab(ss, m.Source)
		}
		if err == nil {
			err = setMapping(dcpl, vs, ss, m)
		}
		C.H5Sclose(vs)
		C.H5Sclose(ss)
		if err != nil {
			return err
		}
	}
	return nil
}

// setMapping adds mapping m, of the selections vs and ss, to dcpl.
// Caller holds lib.
func setMapping(dcpl, vs, ss C.hid_t, m VirtualMap) error {
	fn, err := cName("virtual source file", m.File)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(fn))
	dn, err := cName("virtual source dataset", m.Dataset)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(dn))
	if C.H5Pset_virtual(dcpl, vs, fn, dn, ss) < 0 {
		return errorf("virtual mapping to %s:%s", m.File, m.Dataset)
	}
	return nil
}

// MaxVirtualMaps bounds the mappings VirtualMaps reads.
const MaxVirtualMaps = 1 << 16

// VirtualMaps reads the mappings of a virtual dataset, each selection as
// a regular hyperslab (a selection of all of a space is one block of its
// extent); a mapping whose selection is not a regular hyperslab (points,
// unions of slabs) is refused with ErrIrregular naming it.
func (d *Dataset) VirtualMaps() ([]VirtualMap, error) {
	lock()
	defer unlock()
	dcpl := C.H5Dget_create_plist(d.id)
	if dcpl < 0 {
		return nil, errorf("dcpl")
	}
	defer C.H5Pclose(dcpl)
	var n C.size_t
	if C.H5Pget_virtual_count(dcpl, &n) < 0 {
		return nil, errorf("virtual mapping count")
	}
	if n > MaxVirtualMaps {
		return nil, fmt.Errorf("%w: %d virtual mappings (at most %d)", ErrTooLarge, n, MaxVirtualMaps)
	}
	out := make([]VirtualMap, 0, n)
	for i := C.size_t(0); i < n; i++ {
		var m VirtualMap
		vs := C.H5Pget_virtual_vspace(dcpl, i)
		if vs < 0 {
			return nil, errorf("virtual mapping %d: virtual selection", i)
		}
		var err error
		m.Virtual, _, err = slabOf(vs)
		C.H5Sclose(vs)
		if err != nil {
			return nil, fmt.Errorf("virtual mapping %d: virtual selection: %w", i, err)
		}
		ss := C.H5Pget_virtual_srcspace(dcpl, i)
		if ss < 0 {
			return nil, errorf("virtual mapping %d: source selection", i)
		}
		m.Source, m.SourceDims, err = slabOf(ss)
		C.H5Sclose(ss)
		if err != nil {
			return nil, fmt.Errorf("virtual mapping %d: source selection: %w", i, err)
		}
		if m.File, err = vdsName(func(buf *C.char, size C.size_t) C.ssize_t { return C.H5Pget_virtual_filename(dcpl, i, buf, size) }); err != nil {
			return nil, fmt.Errorf("virtual mapping %d: source file: %w", i, err)
		}
		if m.Dataset, err = vdsName(func(buf *C.char, size C.size_t) C.ssize_t { return C.H5Pget_virtual_dsetname(dcpl, i, buf, size) }); err != nil {
			return nil, fmt.Errorf("virtual mapping %d: source dataset: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// ErrIrregular is a virtual mapping's selection that is not a regular
// hyperslab.
var ErrIrregular = errors.New("hdf5: selection is not a regular hyperslab")

// slabOf reads space's selection as a regular hyperslab, and its extent.
// Caller holds lib.
func slabOf(space C.hid_t) (Slab, []uint64, error) {
	r := int(C.H5Sget_simple_extent_ndims(space))
	if r < 0 || r > 32 {
		return Slab{}, nil, errorf("rank")
	}
	dims := make([]uint64, r)
	if r > 0 && C.H5Sget_simple_extent_dims(space, hsize(dims), nil) < 0 {
		return Slab{}, nil, errorf("dims")
	}
	sl := Slab{Start: make([]uint64, r), Stride: make([]uint64, r), Count: make([]uint64, r), Block: make([]uint64, r)}
	switch C.H5Sget_select_type(space) {
	case C.H5S_SEL_ALL:
		for i := range dims {
			sl.Stride[i], sl.Count[i], sl.Block[i] = 1, 1, dims[i]
		}
		return sl, dims, nil
	case C.H5S_SEL_HYPERSLABS:
		if C.H5Sis_regular_hyperslab(space) <= 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			return Slab{}, nil, ErrIrregular
		}
		if r > 0 && C.H5Sget_regular_hyperslab(space, hsize(sl.Start), hsize(sl.Stride), hsize(sl.Count), hsize(sl.Block)) < 0 {
			return Slab{}, nil, errorf("hyperslab")
		}
		return sl, dims, nil
	}
	return Slab{}, nil, ErrIrregular
}

// vdsName reads a mapping's file or dataset name through get (the
// H5Pget_virtual_* calling convention: length first, then the name).
// Caller holds lib.
func vdsName(get func(*C.char, C.size_t) C.ssize_t) (string, error) {
	n := get(nil, 0)
	if n < 0 {
		return "", errorf("name")
	}
	if n > 1<<16 {
		return "", fmt.Errorf("%w: a name of %d bytes", ErrTooLarge, n)
	}
	buf := make([]byte, int(n)+1)
	if get((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))) != n {
		return "", errorf("name")
	}
	return string(buf[:n]), nil
}

// Dataset is an open dataset.
type Dataset struct {
	id   C.hid_t
	rank int
}

func hsize(v []uint64) *C.hsize_t {
	if len(v) == 0 {
		return nil
	}
	return (*C.hsize_t)(unsafe.Pointer(&v[0]))
}

// CreateDataset creates a chunked (or contiguous) dataset at path
// ('/'-separated; missing intermediate groups are created).
func (f *File) CreateDataset(path string, s Spec) (*Dataset, error) {
	r := len(s.Dims)
	unchunked := s.Contiguous || len(s.Virtual) > 0
	if s.Space != "" {
		if s.Space != "scalar" && s.Space != "null" || r != 0 || len(s.MaxDims) != 0 || len(s.Chunk) != 0 || len(s.Filters) != 0 || len(s.Virtual) != 0 {
			return nil, fmt.Errorf("%w: dataset %s: a %q dataspace has no dims, chunks, filters or mappings", ErrHDF5, path, s.Space)
		}
		unchunked, s.Contiguous = true, true
	} else if r == 0 || len(s.MaxDims) != r || (!unchunked && len(s.Chunk) != r) {
		return nil, fmt.Errorf("%w: dataset %s: rank mismatch", ErrHDF5, path)
	}
	if unchunked && (len(s.Chunk) != 0 || len(s.Filters) != 0 || s.Vlen && s.Space == "" || s.Contiguous && len(s.Virtual) > 0) {
		return nil, fmt.Errorf("%w: dataset %s: a contiguous or virtual dataset has no chunks or filters", ErrHDF5, path)
	}
	if s.Vlen && s.Fill != nil {
		return nil, fmt.Errorf("%w: dataset %s: a variable-length dataset's fill is the empty sequence", ErrHDF5, path)
	}
	cs, err := cName("dataset", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cs))
	lock()
	defer unlock()
	tid, err := makeType(s.Type, s.Vlen)
	if err != nil {
		return nil, err
	}
	defer C.H5Tclose(tid)
	if s.Fill != nil && len(s.Fill) != s.Type.Size {
		return nil, fmt.Errorf("%w: fill of %d bytes for %v", ErrHDF5, len(s.Fill), s.Type)
	}
	var space C.hid_t
	switch s.Space {
	case "scalar":
		space = C.H5Screate(C.H5S_SCALAR)
	case "null":
		space = C.H5Screate(C.H5S_NULL)
	default:
		space = C.H5Screate_simple(C.int(r), hsize(s.Dims), hsize(s.MaxDims))
	}
	if space < 0 {
		return nil, errorf("dataspace %v max %v", s.Dims, s.MaxDims)
	}
	defer C.H5Sclose(space)
	dcpl := C.H5Pcreate(C.scc_dcpl_class())
	if dcpl < 0 {
		return nil, errorf("dcpl")
	}
	defer C.H5Pclose(dcpl)
	if len(s.Virtual) > 0 {
		if err := setVirtual(dcpl, space, s); err != nil {
			return nil, err
		}
	} else if s.Contiguous {
		if C.H5Pset_layout(dcpl, C.H5D_CONTIGUOUS) < 0 {
			return nil, errorf("contiguous layout")
		}
	} else if C.H5Pset_chunk(dcpl, C.int(r), hsize(s.Chunk)) < 0 {
		return nil, errorf("chunk %v", s.Chunk)
	}
	if s.Fill != nil && !(s.Type.Class >= Enum && allZero(s.Fill)) {
		// (A zero fill of a described type is left as HDF5's default,
		// the same zero: h5py cannot convert a user-defined fill value
		// of a tagged opaque or an array type into its own, so the
		// dataset's fillvalue would not read.)
		if C.H5Pset_fill_value(dcpl, tid, unsafe.Pointer(&s.Fill[0])) < 0 {
			return nil, errorf("fill value")
		}
	}
	for _, fl := range s.Filters {
		var rc C.herr_t
		switch fl.ID {
		case FilterShuffle:
			rc = C.H5Pset_shuffle(dcpl)
		case FilterDeflate:
			rc = C.H5Pset_deflate(dcpl, C.uint(fl.Level))
		default:
			return nil, fmt.Errorf("%w: filter %d not supported by this binding", ErrHDF5, fl.ID)
		}
		if rc < 0 {
			return nil, errorf("filter %d", fl.ID)
		}
	}
	lcpl := C.H5Pcreate(C.scc_lcpl_class())
	if lcpl < 0 {
		return nil, errorf("lcpl")
	}
	defer C.H5Pclose(lcpl)
	if C.H5Pset_create_intermediate_group(lcpl, 1) < 0 {
		return nil, errorf("lcpl")
	}
	id := C.H5Dcreate2(f.id, cs, tid, space, lcpl, dcpl, C.H5P_DEFAULT)
	if id < 0 {
		return nil, errorf("create dataset %s", path)
	}
	return &Dataset{id: id, rank: r}, nil
}

// OpenDataset opens the dataset at path.
func (f *File) OpenDataset(path string) (*Dataset, error) {
	cs, err := cName("dataset", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cs))
	lock()
	defer unlock()
	id := C.H5Dopen2(f.id, cs, originDapl())
	if id < 0 {
		return nil, errorf("open dataset %s", path)
	}
	space := C.H5Dget_space(id)
	if space < 0 {
		C.H5Dclose(id)
		return nil, errorf("dataspace of %s", path)
	}
	r := C.H5Sget_simple_extent_ndims(space)
	C.H5Sclose(space)
	if r < 0 {
		C.H5Dclose(id)
		return nil, errorf("rank of %s", path)
	}
	return &Dataset{id: id, rank: int(r)}, nil
}

// Close closes the dataset. Idempotent.
func (d *Dataset) Close() error {
	lock()
	defer unlock()
	if d.id < 0 {
		return nil
	}
	rc := C.H5Dclose(d.id)
	d.id = -1
	if rc < 0 {
		return errorf("close dataset")
	}
	return nil
}

// Layout is a dataset's storage layout.
type Layout int

const (
	Compact    Layout = 0
	Contiguous Layout = 1
	Chunked    Layout = 2
	Virtual    Layout = 3
)

// Info is what a dataset's creation properties and dataspace say.
type Info struct {
	Type Type
	// Space is "" for a simple dataspace; "scalar", "null" or "unknown"
	// otherwise, and then nothing below is filled in.
	Space   string
	Dims    []uint64
	MaxDims []uint64
	Layout  Layout
	Chunk   []uint64 // nil unless Chunked
	Filters []Filter
	Fill    []byte // the fill value as one little-endian element, or nil when undefined
	// External: the raw data lives in external files (H5Pset_external),
	// outside the HDF5 file.
	External bool
	// ExternalFiles are those files, in order, as the file names them
	// (a relative name is resolved against the HDF5 file's directory:
	// see originDapl).
	ExternalFiles []ExternalFile
	// Allocated: some storage exists for the raw data; when false, every
	// element reads as the fill value.
	Allocated bool
	// StorageSize is H5Dget_storage_size: the bytes allocated for the
	// raw data (for a contiguous dataset, its whole extent once allocated).
	StorageSize uint64
	// ChunkInfoUnreliable: the chunk index is an extensible array over an
	// unlimited dimension other than the first. libhdf5 1.10 keeps such an
	// index in swizzled order, and H5Dget_chunk_info and
	// H5Dget_chunk_info_by_coord then report the offsets and sizes of
	// other chunks (H5Dread_chunk and H5Dread are right), so the chunks
	// of such a dataset cannot be listed.
	ChunkInfoUnreliable bool
}

// ExternalFile is one external raw data file of a dataset: Size bytes
// from Offset (Size Unlimited: to its end).
type ExternalFile struct {
	Name   string
	Offset int64
	Size   uint64
}

// MaxExternalFiles bounds the external files a dataset may list.
const MaxExternalFiles = 1 << 16

var (
	originOnce sync.Once
	originID   C.hid_t = C.H5P_DEFAULT
)

// originDapl is the dataset access property list every dataset is opened
// with: external raw data files named by a relative path are found
// relative to the HDF5 file's directory ("${ORIGIN}"), as h5py users
// expect, not to the process's working directory (libhdf5's default).
// HDF5_EXTFILE_PREFIX, when set, still takes precedence. Caller holds
// lib.
func originDapl() C.hid_t {
	originOnce.Do(func() {
		id := C.H5Pcreate(C.scc_dapl_class())
		if id < 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			return
		}
		cs := C.CString("${ORIGIN}")
		defer C.free(unsafe.Pointer(cs))
		if C.H5Pset_efile_prefix(id, cs) < 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			C.H5Pclose(id)
			return
		}
		originID = id
	})
	return originID
}

// typeOf classifies an HDF5 type as the binding maps it. Caller holds
// lib.
func typeOf(tid C.hid_t) Type {
	budget := maxTypeNodes
	return typeOfDepth(tid, 0, &budget)
}

// typeOfDepth is typeOf of a type nested depth deep in another, visiting
// at most *budget more types in all.
func typeOfDepth(tid C.hid_t, depth int, budget *int) Type {
	var t Type
	t.Size = int(C.H5Tget_size(tid))
	switch C.H5Tget_class(tid) {
	case C.H5T_INTEGER:
		t.Class = Int
		if C.H5Tget_sign(tid) == C.H5T_SGN_NONE {
			t.Class = Uint
		}
	case C.H5T_FLOAT:
		t.Class = Float
	case C.H5T_ENUM:
		if C.scc_bool_enum(tid) > 0 {
			t.Class = Bool
			break
		}
		return describedOf(tid, t, depth, budget)
	case C.H5T_COMPOUND:
		var be C.int
		if C.scc_complex_size(tid, &be) > 0 {
			t.Class, t.BigEndian = Complex, be != 0
			C.H5Eclear2(C.H5E_DEFAULT)
			break
		}
		C.H5Eclear2(C.H5E_DEFAULT)
		return describedOf(tid, t, depth, budget)
	case C.H5T_OPAQUE, C.H5T_BITFIELD, C.H5T_ARRAY:
		return describedOf(tid, t, depth, budget)
	case C.H5T_VLEN:
		base := C.H5Tget_super(tid)
		if base < 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			return Type{Class: Other, Name: "variable-length sequence", Size: t.Size}
		}
		bt := typeOfDepth(base, depth+1, budget)
		C.H5Tclose(base)
		// A sequence of a described type (enum, opaque, bitfield, array,
		// compound: of fixed size, as describedOf classifies them) reads
		// like one of numbers; a sequence of fixed-length strings has no
		// scc form (scc's variable-length elements are sequences of
		// values, a string is not one), nor one of sequences.
		if bt.Class == Other || bt.Class == String || bt.Class == ObjRef || bt.Vlen {
			return Type{Class: Other, Name: "variable-length sequence of " + bt.String(), Size: t.Size}
		}
		bt.Vlen = true
		return bt
	case C.H5T_REFERENCE:
		t.Class, t.Name = Other, "reference"
		switch {
		case C.H5Tequal(tid, C.scc_ref_obj()) > 0:
			t.Class, t.Name = ObjRef, ""
		case C.H5Tequal(tid, C.scc_ref_reg()) > 0:
			t.Name = "region reference"
		}
	case C.H5T_STRING:
		t.Class, t.Name = Other, "variable-length string"
		if C.H5Tis_variable_str(tid) > 0 {
			t.Class, t.Name, t.Size, t.Vlen = String, "", 1, true
			t.UTF8 = C.H5Tget_cset(tid) == C.H5T_CSET_UTF8
		} else {
			t.Class, t.Name = String, ""
			t.Pad = int(C.H5Tget_strpad(tid))
			t.UTF8 = C.H5Tget_cset(tid) == C.H5T_CSET_UTF8
			if t.Pad < PadNullTerm || t.Pad > PadSpacePad {
				t.Class, t.Name = Other, "string of unknown padding"
			}
		}
	default:
		t.Class, t.Name = Other, className(C.H5Tget_class(tid))
	}
	if t.Class == Int || t.Class == Uint || t.Class == Float {
		switch C.H5Tget_order(tid) {
		case C.H5T_ORDER_LE:
		case C.H5T_ORDER_BE:
			t.BigEndian = true
		default:
			t.Class, t.Name = Other, "mixed-order number"
		}
	}
	if t.Class == Float && t.Size == 2 {
		// numpy's float16 as h5py writes it, or bfloat16 (scc_half_type).
		switch C.scc_half_kind(tid) {
		case 1:
			return t
		case 2:
			t.BFloat = true
			return t
		}
		t.Class, t.Name = Other, "non-IEEE 16-bit float"
		return t
	}
	if t.Class == Float && C.H5Tequal(tid, C.scc_le_type(2, C.size_t(t.Size))) <= 0 &&
		C.H5Tequal(tid, C.H5T_IEEE_F32BE) <= 0 && C.H5Tequal(tid, C.H5T_IEEE_F64BE) <= 0 {
		t.Class, t.Name = Other, "non-IEEE float"
	}
	return t
}

// Info reads the dataset's type, extent, layout, filters and fill value.
func (d *Dataset) Info() (Info, error) {
	lock()
	defer unlock()
	var in Info
	tid := C.H5Dget_type(d.id)
	if tid < 0 {
		return in, errorf("type")
	}
	defer C.H5Tclose(tid)
	in.Type = typeOf(tid)
	space := C.H5Dget_space(d.id)
	if space < 0 {
		return in, errorf("dataspace")
	}
	defer C.H5Sclose(space)
	switch C.H5Sget_simple_extent_type(space) {
	case C.H5S_SIMPLE:
	case C.H5S_SCALAR:
		in.Space = "scalar"
	case C.H5S_NULL:
		in.Space = "null"
	default:
		in.Space = "unknown"
		return in, nil
	}
	in.Dims = make([]uint64, d.rank)
	in.MaxDims = make([]uint64, d.rank)
	if d.rank > 0 && C.H5Sget_simple_extent_dims(space, hsize(in.Dims), hsize(in.MaxDims)) < 0 {
		return in, errorf("dims")
	}
	dcpl := C.H5Dget_create_plist(d.id)
	if dcpl < 0 {
		return in, errorf("dcpl")
	}
	defer C.H5Pclose(dcpl)
	in.Layout = Layout(C.H5Pget_layout(dcpl))
	if in.Layout == Chunked {
		in.Chunk = make([]uint64, d.rank)
		if C.H5Pget_chunk(dcpl, C.int(d.rank), hsize(in.Chunk)) < 0 {
			return in, errorf("chunk dims")
		}
	}
	n := int(C.H5Pget_nfilters(dcpl))
	for i := 0; i < n; i++ {
		var flags C.uint
		cd := make([]C.uint, 8)
		ncd := C.size_t(len(cd))
		var name [64]C.char
		var cfg C.uint
		id := C.H5Pget_filter2(dcpl, C.uint(i), &flags, &ncd, &cd[0], C.size_t(len(name)), &name[0], &cfg)
		if id < 0 {
			return in, errorf("filter %d", i)
		}
		fl := Filter{ID: int(id), Name: C.GoString(&name[0])}
		for _, v := range cd[:min(int(ncd), len(cd))] {
			fl.Params = append(fl.Params, uint(v))
		}
		if (id == C.H5Z_FILTER_DEFLATE || id == FilterZstd) && ncd > 0 {
			fl.Level = int(int32(cd[0]))
		}
		fl.Optional = flags&C.H5Z_FLAG_OPTIONAL != 0
		if C.scc_filter_registered(C.int(id)) != 0 {
			var fcfg C.uint
			if C.H5Zget_filter_info(id, &fcfg) >= 0 && fcfg&C.H5Z_FILTER_CONFIG_DECODE_ENABLED != 0 {
				fl.Available = true
			}
		}
		C.H5Eclear2(C.H5E_DEFAULT)
		in.Filters = append(in.Filters, fl)
	}
	if n := int(C.H5Pget_external_count(dcpl)); n > 0 {
		in.External = true
		if n > MaxExternalFiles {
			return in, fmt.Errorf("%w: %d external raw data files (at most %d)", ErrTooLarge, n, MaxExternalFiles)
		}
		for i := 0; i < n; i++ {
			var name [4096]C.char
			var off C.off_t
			var size C.hsize_t
			if C.H5Pget_external(dcpl, C.uint(i), C.size_t(len(name)), &name[0], &off, &size) < 0 {
				return in, errorf("external file %d", i)
			}
			in.ExternalFiles = append(in.ExternalFiles, ExternalFile{Name: C.GoString(&name[0]), Offset: int64(off), Size: uint64(size)})
		}
	}
	var ss C.H5D_space_status_t
	if C.H5Dget_space_status(d.id, &ss) < 0 {
		return in, errorf("space status")
	}
	in.Allocated = ss != C.H5D_SPACE_STATUS_NOT_ALLOCATED
	in.StorageSize = uint64(C.H5Dget_storage_size(d.id))
	if in.Layout == Chunked {
		var idx C.H5D_chunk_index_t
		if C.H5Dget_chunk_index_type(d.id, &idx) < 0 {
			return in, errorf("chunk index type")
		}
		if idx == C.H5D_CHUNK_IDX_EARRAY {
			for i, m := range in.MaxDims {
				if m == Unlimited && i > 0 {
					in.ChunkInfoUnreliable = true
				}
			}
		}
	}
	var st C.H5D_fill_value_t
	if C.H5Pfill_value_defined(dcpl, &st) < 0 {
		return in, errorf("fill value")
	}
	if st != C.H5D_FILL_VALUE_UNDEFINED && in.Type.Class != Other && in.Type.Class != ObjRef && !in.Type.Vlen {
		// Ask for the value in the little-endian type of the same class
		// and size: HDF5 converts it from the dataset's byte order.
		mt, err := makeType(in.Type.LittleEndian(), false)
		if err != nil {
			return in, err
		}
		defer C.H5Tclose(mt)
		fill := make([]byte, in.Type.Size)
		if C.H5Pget_fill_value(dcpl, mt, unsafe.Pointer(&fill[0])) < 0 {
			return in, errorf("fill value")
		}
		zeroPadding(in.Type, fill)
		in.Fill = fill
	}
	return in, nil
}

// ChunkInfo reports the stored chunk whose first element is at offset
// (element coordinates): its filter mask and stored size; size 0 means the
// chunk is not allocated.
func (d *Dataset) ChunkInfo(offset []uint64) (mask uint32, size uint64, err error) {
	if len(offset) != d.rank {
		return 0, 0, fmt.Errorf("%w: offset rank", ErrHDF5)
	}
	lock()
	defer unlock()
	var m C.uint
	var addr C.haddr_t
	var sz C.hsize_t
	if C.H5Dget_chunk_info_by_coord(d.id, hsize(offset), &m, &addr, &sz) < 0 {
		return 0, 0, errorf("chunk info at %v", offset)
	}
	if addr == C.HADDR_UNDEF {
		return 0, 0, nil
	}
	return uint32(m), uint64(sz), nil
}

// ReadChunk reads the stored (filtered) bytes of the chunk at offset into
// buf, which must hold the size ChunkInfo reported; it returns the filter
// mask.
func (d *Dataset) ReadChunk(offset []uint64, buf []byte) (uint32, error) {
	if len(offset) != d.rank || len(buf) == 0 {
		return 0, fmt.Errorf("%w: bad chunk read arguments", ErrHDF5)
	}
	lock()
	defer unlock()
	var sz C.hsize_t
	if C.H5Dget_chunk_storage_size(d.id, hsize(offset), &sz) < 0 {
		return 0, errorf("chunk size at %v", offset)
	}
	if uint64(sz) != uint64(len(buf)) {
		return 0, fmt.Errorf("%w: chunk at %v is %d bytes, buffer %d", ErrHDF5, offset, sz, len(buf))
	}
	var m C.uint32_t
	if C.H5Dread_chunk(d.id, C.H5P_DEFAULT, hsize(offset), &m, unsafe.Pointer(&buf[0])) < 0 {
		return 0, errorf("read chunk at %v", offset)
	}
	return uint32(m), nil
}

// WriteChunk stores data as the chunk at offset with the given filter mask,
// bypassing the filter pipeline (H5Dwrite_chunk).
func (d *Dataset) WriteChunk(offset []uint64, mask uint32, data []byte) error {
	if len(offset) != d.rank || len(data) == 0 {
		return fmt.Errorf("%w: bad chunk write arguments", ErrHDF5)
	}
	lock()
	defer unlock()
	if C.H5Dwrite_chunk(d.id, C.H5P_DEFAULT, C.uint32_t(mask), hsize(offset), C.size_t(len(data)), unsafe.Pointer(&data[0])) < 0 {
		return errorf("write chunk at %v", offset)
	}
	return nil
}

// ReadBox reads the box [start, start+count) into buf as little-endian
// elements of memory type t (HDF5 converts from the stored byte order).
func (d *Dataset) ReadBox(t Type, start, count []uint64, buf []byte) error {
	return d.box(t, start, count, buf, false)
}

// WriteBox writes buf (little-endian elements of type t) to the box.
func (d *Dataset) WriteBox(t Type, start, count []uint64, buf []byte) error {
	return d.box(t, start, count, buf, true)
}

func (d *Dataset) box(t Type, start, count []uint64, buf []byte, write bool) error {
	if !d.boxRank(start, count) {
		return fmt.Errorf("%w: box rank", ErrHDF5)
	}
	n := uint64(t.Size)
	for _, c := range count {
		n *= c
	}
	if n != uint64(len(buf)) {
		return fmt.Errorf("%w: box of %d bytes, buffer %d", ErrHDF5, n, len(buf))
	}
	if n == 0 {
		return nil
	}
	lock()
	defer unlock()
	mt, err := makeType(t, false)
	if err != nil {
		return err
	}
	defer C.H5Tclose(mt)
	fs, ms, err := d.boxSpaces(start, count)
	if err != nil {
		return err
	}
	defer C.H5Sclose(fs)
	defer C.H5Sclose(ms)
	var rc C.herr_t
	if write {
		rc = C.H5Dwrite(d.id, mt, ms, fs, C.H5P_DEFAULT, unsafe.Pointer(&buf[0]))
	} else {
		rc = C.H5Dread(d.id, mt, ms, fs, C.H5P_DEFAULT, unsafe.Pointer(&buf[0]))
	}
	if rc < 0 {
		return errorf("transfer %v+%v", start, count)
	}
	if !write {
		zeroPadding(t, buf)
	}
	return nil
}

// WriteVlen writes the box [start, start+count) of a dataset of
// variable-length sequences of t: lens[i] elements for the i-th element in
// C order, their little-endian values packed one after the other in data.
func (d *Dataset) WriteVlen(t Type, start, count []uint64, lens []uint64, data []byte) error {
	if !d.boxRank(start, count) {
		return fmt.Errorf("%w: box rank", ErrHDF5)
	}
	n := uint64(1)
	for _, c := range count {
		n *= c
	}
	var total uint64
	for _, l := range lens {
		total += l
	}
	if uint64(len(lens)) != n || total*uint64(t.Size) != uint64(len(data)) {
		return fmt.Errorf("%w: %d sequences of %d bytes for a box of %d", ErrHDF5, len(lens), len(data), n)
	}
	if n == 0 {
		return nil
	}
	lock()
	defer unlock()
	mt, err := makeType(t, true)
	if err != nil {
		return err
	}
	defer C.H5Tclose(mt)
	fs, ms, err := d.boxSpaces(start, count)
	if err != nil {
		return err
	}
	defer C.H5Sclose(fs)
	defer C.H5Sclose(ms)
	var p *C.uchar
	if len(data) > 0 {
		p = (*C.uchar)(unsafe.Pointer(&data[0]))
	}
	if t.Class == String && t.Vlen {
		if bytes.IndexByte(data, 0) >= 0 {
			return fmt.Errorf("%w: a string of %v+%v holds NUL, which a variable-length HDF5 string cannot", ErrStringNUL, start, count)
		}
		if C.scc_write_vlen_strs(d.id, mt, ms, fs, C.size_t(n), (*C.size_t)(unsafe.Pointer(&lens[0])), p) < 0 {
			return errorf("write %v+%v", start, count)
		}
		return nil
	}
	if C.scc_write_vlen(d.id, mt, ms, fs, C.size_t(n), (*C.size_t)(unsafe.Pointer(&lens[0])), C.size_t(t.Size), p) < 0 {
		return errorf("write %v+%v", start, count)
	}
	return nil
}

// ErrStringNUL is a string to write as a variable-length HDF5 string (a C
// string) that holds NUL.
var ErrStringNUL = errors.New("hdf5: string holds NUL")

// ErrTooLarge is a read whose variable-length data exceeds the bound the
// caller gave.
var ErrTooLarge = errors.New("hdf5: variable-length data too large")

// ReadVlen reads the box [start, start+count) of a dataset of
// variable-length sequences (or strings) of t: lens[i] base elements for
// the i-th element in C order, their little-endian values packed in data
// (a string's bytes without its terminating NUL). The data the library
// would allocate is measured first (H5Dvlen_get_buf_size) and a box of
// more than maxBytes is refused with ErrTooLarge before it is read.
func (d *Dataset) ReadVlen(t Type, start, count []uint64, maxBytes uint64) (lens []uint64, data []byte, err error) {
	if !d.boxRank(start, count) || !t.Vlen {
		return nil, nil, fmt.Errorf("%w: bad variable-length read arguments", ErrHDF5)
	}
	n := uint64(1)
	for _, c := range count {
		n *= c
	}
	if n == 0 {
		return nil, nil, nil
	}
	if n > maxBytes/8+1 {
		return nil, nil, fmt.Errorf("%w: %d elements at once", ErrTooLarge, n)
	}
	t.BigEndian = false
	lock()
	defer unlock()
	mt, err := makeType(t, true)
	if err != nil {
		return nil, nil, err
	}
	defer C.H5Tclose(mt)
	fs, ms, err := d.boxSpaces(start, count)
	if err != nil {
		return nil, nil, err
	}
	defer C.H5Sclose(fs)
	defer C.H5Sclose(ms)
	str := 0
	if t.Class == String {
		str = 1
	}
	var need C.hsize_t
	if d.rank == 0 {
		// libhdf5 1.10's H5Dvlen_get_buf_size crashes on a scalar
		// dataspace: the one element is read once to measure it.
		var got C.size_t
		var one C.size_t
		if C.scc_read_vlen(d.id, mt, ms, fs, 1, C.size_t(t.Size), C.int(str), &one, nil, 0, &got) < 0 {
			return nil, nil, errorf("variable-length size of %v+%v", start, count)
		}
		need = C.hsize_t(got)
	} else if C.H5Dvlen_get_buf_size(d.id, mt, fs, &need) < 0 {
		return nil, nil, errorf("variable-length size of %v+%v", start, count)
	}
	if uint64(need) > maxBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes in %v+%v (at most %d)", ErrTooLarge, need, start, count, maxBytes)
	}
	lens = make([]uint64, n)
	data = make([]byte, max(uint64(need), 1))
	var got C.size_t
	rc := C.scc_read_vlen(d.id, mt, ms, fs, C.size_t(n), C.size_t(t.Size), C.int(str),
		(*C.size_t)(unsafe.Pointer(&lens[0])), (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), &got)
	switch rc {
	case 0:
	case -2:
		return nil, nil, fmt.Errorf("%w: %v+%v holds more than the %d bytes the library measured", ErrHDF5, start, count, need)
	default:
		return nil, nil, errorf("read %v+%v", start, count)
	}
	return lens, data[:got], nil
}

// MaxRefPath bounds the path of a referenced object.
const MaxRefPath = 1 << 16

// refNames returns the path of the object each reference points to ("" for
// the null reference), asking the file through loc. Caller holds lib.
func refNames(loc C.hid_t, refs []C.hobj_ref_t) ([]string, error) {
	out := make([]string, len(refs))
	var buf []byte
	for i := range refs {
		n := C.scc_ref_name(loc, &refs[i], nil, 0)
		if n < 0 {
			return nil, errorf("object reference %d", i)
		}
		if n == 0 {
			continue
		}
		if n > MaxRefPath {
			return nil, fmt.Errorf("%w: object reference %d names a path of %d bytes (at most %d)", ErrTooLarge, i, n, MaxRefPath)
		}
		if len(buf) < int(n)+1 {
			buf = make([]byte, int(n)+1)
		}
		if C.scc_ref_name(loc, &refs[i], (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(n+1)) != n {
			return nil, errorf("object reference %d", i)
		}
		out[i] = string(buf[:n])
	}
	return out, nil
}

// ReadObjRefs reads the box [start, start+count) of a dataset of object
// references as the referenced objects' paths, in C order ("" for the
// null reference). A box of more than maxElems elements is refused with
// ErrTooLarge.
func (d *Dataset) ReadObjRefs(start, count []uint64, maxElems uint64) ([]string, error) {
	if !d.boxRank(start, count) {
		return nil, fmt.Errorf("%w: box rank", ErrHDF5)
	}
	n := uint64(1)
	for _, c := range count {
		n *= c
	}
	if n > maxElems {
		return nil, fmt.Errorf("%w: %d references at once", ErrTooLarge, n)
	}
	if n == 0 {
		return nil, nil
	}
	lock()
	defer unlock()
	fs, ms, err := d.boxSpaces(start, count)
	if err != nil {
		return nil, err
	}
	defer C.H5Sclose(fs)
	defer C.H5Sclose(ms)
	refs := make([]C.hobj_ref_t, n)
	if C.H5Dread(d.id, C.scc_ref_obj(), ms, fs, C.H5P_DEFAULT, unsafe.Pointer(&refs[0])) < 0 {
		return nil, errorf("read %v+%v", start, count)
	}
	return refNames(d.id, refs)
}

// NumAttrs reports how many attributes the dataset has.
func (d *Dataset) NumAttrs() (int, error) {
	lock()
	defer unlock()
	n := C.scc_num_attrs(d.id)
	if n < 0 {
		return 0, errorf("attributes")
	}
	return int(n), nil
}

// RootAttrs reports how many attributes the file's root group has.
func (f *File) RootAttrs() (int, error) {
	lock()
	defer unlock()
	n := C.scc_num_attrs(f.id)
	if n < 0 {
		return 0, errorf("root attributes")
	}
	return int(n), nil
}

// NumChunks reports how many chunks are stored (allocated).
func (d *Dataset) NumChunks() (uint64, error) {
	lock()
	defer unlock()
	// 1.10 takes the dataset's own dataspace (all selected), not H5S_ALL.
	space := C.H5Dget_space(d.id)
	if space < 0 {
		return 0, errorf("dataspace")
	}
	defer C.H5Sclose(space)
	var n C.hsize_t
	if C.H5Dget_num_chunks(d.id, space, &n) < 0 {
		return 0, errorf("number of chunks")
	}
	return uint64(n), nil
}

// StoredChunk is one allocated chunk: its first element's coordinates,
// filter mask and stored size.
type StoredChunk struct {
	Offset []uint64
	Mask   uint32
	Size   uint64
}

// StoredChunks lists the n allocated chunks (n from NumChunks) in the
// index's order. Each H5Dget_chunk_info call walks the chunk index from its
// start in HDF5 1.10, so this costs O(n^2) index steps: callers use it for
// sparse datasets only (see the importer). ctx is checked between chunks,
// and the library lock is released between them.
func (d *Dataset) StoredChunks(ctx context.Context, n uint64) ([]StoredChunk, error) {
	out := make([]StoredChunk, 0, min(n, 1<<16))
	for i := uint64(0); i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := d.storedChunk(i)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (d *Dataset) storedChunk(i uint64) (StoredChunk, error) {
	lock()
	defer unlock()
	c := StoredChunk{Offset: make([]uint64, d.rank)}
	space := C.H5Dget_space(d.id)
	if space < 0 {
		return c, errorf("dataspace")
	}
	defer C.H5Sclose(space)
	var m C.uint
	var addr C.haddr_t
	var sz C.hsize_t
	if C.H5Dget_chunk_info(d.id, space, C.hsize_t(i), hsize(c.Offset), &m, &addr, &sz) < 0 {
		return c, errorf("chunk %d info", i)
	}
	c.Mask, c.Size = uint32(m), uint64(sz)
	return c, nil
}

// Size reports the file's size in bytes.
func (f *File) Size() (uint64, error) {
	lock()
	defer unlock()
	var n C.hsize_t
	if C.H5Fget_filesize(f.id, &n) < 0 {
		return 0, errorf("file size")
	}
	return uint64(n), nil
}

// boxRank reports whether start and count are a box of the dataset: of
// its rank, or for a scalar or null dataset (rank 0) the box [0]+[1] of
// its one element (none).
func (d *Dataset) boxRank(start, count []uint64) bool {
	if d.rank == 0 {
		return len(start) == 1 && len(count) == 1 && start[0] == 0 && count[0] <= 1
	}
	return len(start) == d.rank && len(count) == d.rank
}

// boxSpaces returns the file dataspace with the box [start, start+count)
// selected and a memory dataspace of the box's shape; the caller closes
// both. Caller holds lib.
func (d *Dataset) boxSpaces(start, count []uint64) (fs, ms C.hid_t, err error) {
	fs = C.H5Dget_space(d.id)
	if fs < 0 {
		return -1, -1, errorf("dataspace")
	}
	if d.rank == 0 {
		// A scalar dataset's one element: its whole dataspace, which
		// selects all by default.
		if ms = C.H5Screate(C.H5S_SCALAR); ms < 0 {
			C.H5Sclose(fs)
			return -1, -1, errorf("memory space")
		}
		return fs, ms, nil
	}
	if C.H5Sselect_hyperslab(fs, C.H5S_SELECT_SET, hsize(start), nil, hsize(count), nil) < 0 {
		C.H5Sclose(fs)
		return -1, -1, errorf("select %v+%v", start, count)
	}
	ms = C.H5Screate_simple(C.int(d.rank), hsize(count), nil)
	if ms < 0 {
		C.H5Sclose(fs)
		return -1, -1, errorf("memory space")
	}
	return fs, ms, nil
}
