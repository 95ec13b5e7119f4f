package h5

/*
#cgo pkg-config: hdf5
#include "shim.h"

static hid_t scc_vlen_utf8(void) {
	hid_t t = H5Tcopy(H5T_C_S1);
	if (t < 0) return -1;
	if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) { H5Tclose(t); return -1; }
	return t;
}

static hid_t scc_fixed_str(size_t n, int utf8) {
	hid_t t = H5Tcopy(H5T_C_S1);
	if (t < 0) return -1;
	if (H5Tset_size(t, n) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
	    H5Tset_cset(t, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII) < 0) { H5Tclose(t); return -1; }
	return t;
}

static hid_t scc_vlen_like(hid_t ftype) {
	hid_t t = H5Tcopy(H5T_C_S1);
	if (t < 0) return -1;
	if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5Tget_cset(ftype)) < 0) { H5Tclose(t); return -1; }
	return t;
}

static herr_t scc_write_vlen_str(hid_t attr, hid_t t, const char *s) {
	return H5Awrite(attr, t, &s);
}

static herr_t scc_read_vlen_str(hid_t attr, hid_t t, char **out) {
	*out = NULL;
	return H5Aread(attr, t, out);
}

// scc_read_vlen_strs reads the n strings of a 1-D attribute of
// variable-length strings into out (n pointers; the caller reclaims them
// with scc_free_vlen_strs).
static herr_t scc_read_vlen_strs(hid_t attr, hid_t t, size_t n, char **out) {
	memset(out, 0, n * sizeof(char *));
	return H5Aread(attr, t, out);
}

static void scc_free_vlen_strs(size_t n, char **s) {
	for (size_t i = 0; i < n; i++) H5free_memory(s[i]);
}

// scc_read_vlen_refs reads the n elements of an attribute of
// variable-length sequences of object references that each hold one
// reference into out: 0, -1 on the library's error, -2 when a sequence
// holds another number of references (out is then not all set).
static int scc_read_vlen_refs(hid_t attr, hid_t space, size_t n, hobj_ref_t *out) {
	hid_t mt = H5Tvlen_create(H5T_STD_REF_OBJ);
	if (mt < 0) return -1;
	hvl_t *buf = calloc(n ? n : 1, sizeof(hvl_t));
	if (!buf) {
		H5Tclose(mt);
		return -1;
	}
	int rc = 0;
	if (H5Aread(attr, mt, buf) < 0) {
		rc = -1;
	} else {
		for (size_t i = 0; i < n; i++) {
			if (buf[i].len != 1 || !buf[i].p) {
				rc = -2;
				continue;
			}
			out[i] = ((hobj_ref_t *)buf[i].p)[0];
		}
		H5Dvlen_reclaim(mt, space, H5P_DEFAULT, buf);
	}
	free(buf);
	H5Tclose(mt);
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"
)

// AttrKind is the kind of an attribute value the binding maps.
type AttrKind int

const (
	AttrNumeric AttrKind = iota + 1 // Scalar or 1-D array of a Type (any class but Other)
	AttrString                      // UTF-8 text
	AttrBytes                       // an opaque byte string
	AttrNull                        // no value over a null dataspace, of Type (a variable-length String: text)
)

// AttrValue is one attribute's value.
//
// On the HDF5 side: a numeric scalar is a scalar dataspace of the
// little-endian predefined type, a numeric array a 1-D simple dataspace; a
// string a scalar variable-length UTF-8 string (a fixed-length NULLPAD one
// when it contains NUL, which a C string cannot hold); a byte string a
// scalar opaque value of its length, untagged as h5py writes numpy.void
// (h5py cannot convert an opaque type whose tag differs from its own), and the empty byte string an opaque of size 1 over a null
// dataspace (HDF5 has no zero-sized opaque type). A numeric value with
// Dims is a simple dataspace of those dimensions (2 or more; Data
// row-major); a null one a null dataspace of its type.
type AttrValue struct {
	Kind   AttrKind
	Type   Type     // AttrNumeric, AttrNull
	Scalar bool     // AttrNumeric: a scalar, not a 1-D array
	Dims   []uint64 // AttrNumeric: the dimensions of a value of 2 or more
	Data   []byte
}

// Attr is a named attribute.
type Attr struct {
	Name  string
	Value AttrValue
	// ObjectRefs: the HDF5 attribute held object references, read as
	// the referenced objects' paths (read side only). RefSequences: each
	// reference stood alone in a variable-length sequence (HDF5's
	// dimension lists, DIMENSION_LIST).
	ObjectRefs, RefSequences bool
}

// Skipped is an attribute ReadAttrs could not map, and why.
type Skipped struct{ Name, Why string }

// MaxRank is the most dimensions an attribute's value has (HDF5's
// H5S_MAX_RANK, scc's engine.MaxAttrRank).
const MaxRank = 32

// MaxAttrBytes bounds the value ReadAttrs will read from a file: larger
// attributes are skipped rather than allocated (the engine's own bound is
// far smaller).
const MaxAttrBytes = 16 << 20

// MaxAttrsBytes bounds what ReadAttrs reads from one object in all, and
// MaxAttrs how many attributes it looks at: a file may hold any number of
// large attributes, which would otherwise all be read into memory (scc
// keeps at most 1 MiB of attributes per object). The rest are skipped.
const (
	MaxAttrsBytes = 16 << 20
	MaxAttrs      = 1 << 16
)

// WriteAttrs writes attributes to the dataset.
func (d *Dataset) WriteAttrs(attrs []Attr) error {
	lock()
	defer unlock()
	return writeAttrs(d.id, attrs)
}

// WriteRootAttrs writes attributes to the file's root group.
func (f *File) WriteRootAttrs(attrs []Attr) error {
	lock()
	defer unlock()
	g, err := f.root()
	if err != nil {
		return err
	}
	defer C.H5Gclose(g)
	return writeAttrs(g, attrs)
}

// WriteGroup creates the group at path (its parent must exist) unless it
// exists, and writes attributes to it.
func (f *File) WriteGroup(path string, attrs []Attr) error {
	cs, err := cName("group", path)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cs))
	lock()
	defer unlock()
	var g C.hid_t
	switch ex := C.H5Lexists(f.id, cs, C.H5P_DEFAULT); {
	case ex < 0:
		return errorf("group %q", path)
	case ex > 0:
		g = C.H5Gopen2(f.id, cs, C.H5P_DEFAULT)
	default:
		g = C.H5Gcreate2(f.id, cs, C.H5P_DEFAULT, C.H5P_DEFAULT, C.H5P_DEFAULT)
	}
	if g < 0 {
		return errorf("group %q", path)
	}
	defer C.H5Gclose(g)
	return writeAttrs(g, attrs)
}

// ReadGroupAttrs is ReadAttrs for the group at path.
func (f *File) ReadGroupAttrs(path string) ([]Attr, []Skipped, error) {
	cs, err := cName("group", path)
	if err != nil {
		return nil, nil, err
	}
	defer C.free(unsafe.Pointer(cs))
	lock()
	defer unlock()
	g := C.H5Gopen2(f.id, cs, C.H5P_DEFAULT)
	if g < 0 {
		return nil, nil, errorf("open group %q", path)
	}
	defer C.H5Gclose(g)
	return readAttrs(g)
}

// ReadAttrs reads the dataset's attributes of the kinds AttrValue covers,
// in name order, and lists the others as skipped.
func (d *Dataset) ReadAttrs() ([]Attr, []Skipped, error) {
	lock()
	defer unlock()
	return readAttrs(d.id)
}

// ReadRootAttrs is ReadAttrs for the file's root group.
func (f *File) ReadRootAttrs() ([]Attr, []Skipped, error) {
	lock()
	defer unlock()
	g, err := f.root()
	if err != nil {
		return nil, nil, err
	}
	defer C.H5Gclose(g)
	return readAttrs(g)
}

// root opens the root group. Caller holds lib.
func (f *File) root() (C.hid_t, error) {
	slash := C.CString("/")
	defer C.free(unsafe.Pointer(slash))
	g := C.H5Gopen2(f.id, slash, C.H5P_DEFAULT)
	if g < 0 {
		return -1, errorf("open root group")
	}
	return g, nil
}

// writeAttrs: caller holds lib.
func writeAttrs(obj C.hid_t, attrs []Attr) error {
	for _, a := range attrs {
		if err := writeAttr(obj, a); err != nil {
			return err
		}
	}
	return nil
}

func writeAttr(obj C.hid_t, a Attr) error {
	v := a.Value
	var space, typ C.hid_t = -1, -1
	closeType := false
	defer func() {
		if space >= 0 {
			C.H5Sclose(space)
		}
		if closeType && typ >= 0 {
			C.H5Tclose(typ)
		}
	}()
	var cstr *C.char
	defer func() {
		if cstr != nil {
			C.free(unsafe.Pointer(cstr))
		}
	}()
	switch v.Kind {
	case AttrNumeric, AttrNull:
		var err error
		switch c := v.Type.Class; {
		case c == Int, c == Uint, c == Float && v.Type.Size != 2:
			typ, err = leType(v.Type)
		default:
			// h5py's encodings: bool an int8 enum, complex a compound
			// {r, i}, strings fixed-length of the type's padding, float16
			// h5py's 16-bit float; the described types (types.go).
			typ, err = makeType(v.Type, false)
			closeType = true
		}
		if err != nil {
			return err
		}
		if v.Kind == AttrNull {
			if len(v.Data) != 0 {
				return fmt.Errorf("%w: attribute %q: null with %d bytes", ErrHDF5, a.Name, len(v.Data))
			}
			space = C.H5Screate(C.H5S_NULL)
			break
		}
		if v.Type.Size <= 0 || len(v.Data)%v.Type.Size != 0 || v.Scalar && len(v.Data) != v.Type.Size {
			return fmt.Errorf("%w: attribute %q: %d bytes for %v", ErrHDF5, a.Name, len(v.Data), v.Type)
		}
		switch {
		case v.Scalar:
			space = C.H5Screate(C.H5S_SCALAR)
		case v.Dims != nil:
			n := uint64(1)
			for _, d := range v.Dims {
				n *= d
			}
			if len(v.Dims) > MaxRank || n*uint64(v.Type.Size) != uint64(len(v.Data)) {
				return fmt.Errorf("%w: attribute %q: shape %v for %d bytes of %v", ErrHDF5, a.Name, v.Dims, len(v.Data), v.Type)
			}
			space = C.H5Screate_simple(C.int(len(v.Dims)), hsize(v.Dims), nil)
		default:
			dims := []uint64{uint64(len(v.Data) / v.Type.Size)}
			space = C.H5Screate_simple(1, hsize(dims), nil)
		}
	case AttrString:
		hasNUL := false
		for _, b := range v.Data {
			hasNUL = hasNUL || b == 0
		}
		if hasNUL || len(v.Data) == 0 {
			// A C string cannot hold NUL; HDF5 has no zero-length
			// fixed string type, so "" is a vlen string too.
			if len(v.Data) == 0 {
				typ = C.scc_vlen_utf8()
			} else {
				typ = C.scc_fixed_str(C.size_t(len(v.Data)), 1)
			}
		} else {
			typ = C.scc_vlen_utf8()
		}
		closeType = true
		space = C.H5Screate(C.H5S_SCALAR)
	case AttrBytes:
		n := max(len(v.Data), 1)
		typ = C.H5Tcreate(C.H5T_OPAQUE, C.size_t(n))
		closeType = true
		if len(v.Data) == 0 {
			space = C.H5Screate(C.H5S_NULL)
		} else {
			space = C.H5Screate(C.H5S_SCALAR)
		}
	default:
		return fmt.Errorf("%w: attribute %q: kind %d", ErrHDF5, a.Name, v.Kind)
	}
	if typ < 0 || space < 0 {
		return errorf("attribute %q: type or dataspace", a.Name)
	}
	name, err := cName("attribute", a.Name)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(name))
	attr := C.H5Acreate2(obj, name, typ, space, C.H5P_DEFAULT, C.H5P_DEFAULT)
	if attr < 0 {
		return errorf("create attribute %q", a.Name)
	}
	var rc C.herr_t
	switch {
	case v.Kind == AttrBytes && len(v.Data) == 0, v.Kind == AttrNull:
		// Null dataspace: nothing to write.
	case v.Kind == AttrString && C.H5Tis_variable_str(typ) > 0:
		cstr = C.CString(string(v.Data))
		rc = C.scc_write_vlen_str(attr, typ, cstr)
	case len(v.Data) == 0:
		// An empty numeric array: nothing to write.
	default:
		rc = C.H5Awrite(attr, typ, unsafe.Pointer(&v.Data[0]))
	}
	if rc < 0 {
		C.H5Aclose(attr)
		return errorf("write attribute %q", a.Name)
	}
	if C.H5Aclose(attr) < 0 {
		return errorf("close attribute %q", a.Name)
	}
	return nil
}

// readAttrs: caller holds lib.
func readAttrs(obj C.hid_t) ([]Attr, []Skipped, error) {
	n := C.scc_num_attrs(obj)
	if n < 0 {
		return nil, nil, errorf("attributes")
	}
	dot := C.CString(".")
	defer C.free(unsafe.Pointer(dot))
	var out []Attr
	var skipped []Skipped
	budget := uint64(MaxAttrsBytes)
	for i := C.longlong(0); i < n; i++ {
		if i == MaxAttrs {
			skipped = append(skipped, Skipped{Name: fmt.Sprintf("(%d more)", int64(n-i)), Why: fmt.Sprintf("not read: more than %d attributes", MaxAttrs)})
			break
		}
		// An attribute the library cannot open or read (a damaged
		// message) is left out, named when its name can be read, with
		// the library's error; the others are read.
		attr := C.H5Aopen_by_idx(obj, dot, C.H5_INDEX_NAME, C.H5_ITER_INC, C.hsize_t(i), C.H5P_DEFAULT, C.H5P_DEFAULT)
		if attr < 0 {
			err := errorf("open attribute %d", int(i))
			name, ok := attrNameByIdx(obj, dot, i)
			if !ok {
				// Not even the names can be read (libhdf5 decodes every
				// attribute message of an object to index them): the
				// rest is left out at once.
				skipped = append(skipped, Skipped{Name: fmt.Sprintf("(%d attributes from #%d)", int64(n-i), int64(i)), Why: "not read: " + err.Error()})
				break
			}
			skipped = append(skipped, Skipped{Name: name, Why: "not read: " + err.Error()})
			continue
		}
		a, why, err := readAttr(attr, budget)
		C.H5Aclose(attr)
		if err != nil {
			name := a.Name
			if name == "" {
				name = fmt.Sprintf("#%d", int64(i))
			}
			skipped = append(skipped, Skipped{Name: name, Why: "not read: " + err.Error()})
			continue
		}
		if why != "" {
			skipped = append(skipped, Skipped{Name: a.Name, Why: why})
		} else {
			out = append(out, a)
			budget -= uint64(len(a.Value.Data))
		}
	}
	return out, skipped, nil
}

// attrNameByIdx is the name of attribute i of obj. Caller holds lib.
func attrNameByIdx(obj C.hid_t, dot *C.char, i C.longlong) (string, bool) {
	ln := C.H5Aget_name_by_idx(obj, dot, C.H5_INDEX_NAME, C.H5_ITER_INC, C.hsize_t(i), nil, 0, C.H5P_DEFAULT)
	if ln < 0 {
		C.H5Eclear2(C.H5E_DEFAULT)
		return "", false
	}
	nb := make([]byte, int(ln)+1)
	if C.H5Aget_name_by_idx(obj, dot, C.H5_INDEX_NAME, C.H5_ITER_INC, C.hsize_t(i), (*C.char)(unsafe.Pointer(&nb[0])), C.size_t(len(nb)), C.H5P_DEFAULT) < 0 {
		C.H5Eclear2(C.H5E_DEFAULT)
		return "", false
	}
	return string(nb[:ln]), true
}

// readAttr reads one open attribute of at most budget bytes; why says why
// it is not mapped.
func readAttr(attr C.hid_t, budget uint64) (a Attr, why string, err error) {
	ln := C.H5Aget_name(attr, 0, nil)
	if ln < 0 {
		return a, "", errorf("attribute name")
	}
	nb := make([]byte, int(ln)+1)
	if C.H5Aget_name(attr, C.size_t(len(nb)), (*C.char)(unsafe.Pointer(&nb[0]))) < 0 {
		return a, "", errorf("attribute name")
	}
	a.Name = string(nb[:ln])
	ftype := C.H5Aget_type(attr)
	if ftype < 0 {
		return a, "", errorf("attribute %q: type", a.Name)
	}
	defer C.H5Tclose(ftype)
	space := C.H5Aget_space(attr)
	if space < 0 {
		return a, "", errorf("attribute %q: dataspace", a.Name)
	}
	defer C.H5Sclose(space)
	var count uint64  // elements; 0 for a null dataspace
	var dims []uint64 // of a value of 2 or more dimensions
	scalar := false
	size := uint64(C.H5Tget_size(ftype))
	switch C.H5Sget_simple_extent_type(space) {
	case C.H5S_SCALAR:
		scalar, count = true, 1
	case C.H5S_NULL:
		return readNull(ftype, a)
	case C.H5S_SIMPLE:
		rank := int(C.H5Sget_simple_extent_ndims(space))
		if rank < 1 || rank > MaxRank {
			return a, fmt.Sprintf("dataspace of rank %d", rank), nil
		}
		hd := make([]C.hsize_t, rank)
		if C.H5Sget_simple_extent_dims(space, &hd[0], nil) < 0 {
			return a, "", errorf("attribute %q: dims", a.Name)
		}
		// The product is bounded as it is formed: a value over
		// MaxAttrBytes is refused below without being allocated.
		count = 1
		for _, d := range hd {
			if d == 0 {
				count = 0
				break
			}
		}
		for _, d := range hd {
			if count == 0 {
				break
			}
			if size == 0 || uint64(d) > MaxAttrBytes/size/count {
				return a, fmt.Sprintf("value of shape %v of %d-byte elements is too large", hd, size), nil
			}
			count *= uint64(d)
		}
		if rank > 1 {
			dims = make([]uint64, rank)
			for i, d := range hd {
				dims[i] = uint64(d)
			}
		}
	default:
		return a, "unknown dataspace", nil
	}
	if size == 0 || count > MaxAttrBytes/size {
		return a, fmt.Sprintf("value of %d×%d bytes is too large", count, size), nil
	}
	if count*size > budget {
		return a, fmt.Sprintf("not read: the object's attributes exceed %d bytes in all", MaxAttrsBytes), nil
	}
	if dims != nil {
		// A value of 2 or more dimensions reads as the 1-D array of its
		// elements (row-major, as HDF5 stores them), then takes its shape.
		a, why, err = readValue(attr, ftype, space, a, false, count, size)
		if why == "" && err == nil {
			if a.Value.Kind != AttrNumeric {
				return a, fmt.Sprintf("%d-dimensional value of kind %d", len(dims), a.Value.Kind), nil
			}
			a.Value.Dims = dims
		}
		return a, why, err
	}
	return readValue(attr, ftype, space, a, scalar, count, size)
}

// readNull reads an attribute over a null dataspace: its type, which
// readTyped maps, a variable-length string (text), or an untagged opaque
// (the empty byte string). Caller holds lib.
func readNull(ftype C.hid_t, a Attr) (Attr, string, error) {
	t := typeOf(ftype)
	C.H5Eclear2(C.H5E_DEFAULT)
	switch {
	case t.Class == Opaque && t.Tag == "":
		a.Value = AttrValue{Kind: AttrBytes, Data: []byte{}}
		return a, "", nil
	case t.Class == String && t.Vlen:
		a.Value = AttrValue{Kind: AttrNull, Type: Type{Class: String, Size: 1, Vlen: true, UTF8: t.UTF8}}
		return a, "", nil
	case t.Class == Other, t.Vlen, t.Class == ObjRef:
		return a, t.String() + " type over a null dataspace", nil
	}
	t = t.LittleEndian()
	mt, err := makeType(t, false)
	if err != nil {
		C.H5Eclear2(C.H5E_DEFAULT)
		return a, t.String() + " type over a null dataspace", nil
	}
	C.H5Tclose(mt)
	a.Value = AttrValue{Kind: AttrNull, Type: t}
	return a, "", nil
}

// readValue reads a scalar or the count elements of an array. Caller
// holds lib.
func readValue(attr, ftype, space C.hid_t, a Attr, scalar bool, count, size uint64) (Attr, string, error) {
	switch cls := C.H5Tget_class(ftype); cls {
	case C.H5T_INTEGER, C.H5T_FLOAT, C.H5T_ENUM, C.H5T_COMPOUND, C.H5T_ARRAY, C.H5T_BITFIELD:
		return readTyped(attr, ftype, space, a, scalar, count)
	case C.H5T_STRING:
		if !scalar {
			return readFixedStrings(attr, ftype, space, a, count)
		}
		var s []byte
		if C.H5Tis_variable_str(ftype) > 0 {
			mt := C.scc_vlen_like(ftype)
			if mt < 0 {
				return a, "", errorf("attribute %q: string type", a.Name)
			}
			var p *C.char
			rc := C.scc_read_vlen_str(attr, mt, &p)
			C.H5Tclose(mt)
			if rc < 0 {
				return a, "", errorf("read attribute %q", a.Name)
			}
			if p != nil {
				s = []byte(C.GoString(p))
				C.H5free_memory(unsafe.Pointer(p))
			}
		} else {
			buf := make([]byte, size)
			if C.H5Aread(attr, ftype, unsafe.Pointer(&buf[0])) < 0 {
				return a, "", errorf("read attribute %q", a.Name)
			}
			switch C.H5Tget_strpad(ftype) {
			case C.H5T_STR_NULLTERM:
				for i, b := range buf {
					if b == 0 {
						buf = buf[:i]
						break
					}
				}
			case C.H5T_STR_NULLPAD:
				for len(buf) > 0 && buf[len(buf)-1] == 0 {
					buf = buf[:len(buf)-1]
				}
			case C.H5T_STR_SPACEPAD:
				for len(buf) > 0 && buf[len(buf)-1] == ' ' {
					buf = buf[:len(buf)-1]
				}
			}
			s = buf
		}
		if !utf8.Valid(s) {
			return a, "string is not valid UTF-8", nil
		}
		a.Value = AttrValue{Kind: AttrString, Data: s}
		return a, "", nil
	case C.H5T_OPAQUE:
		// An untagged opaque scalar is h5py's numpy.void and the byte
		// string this binding writes: a byte string. A tagged one, or an
		// array of opaque values, keeps its type.
		tagged := typeOf(ftype).Tag != ""
		switch {
		case C.H5Sget_simple_extent_type(space) == C.H5S_NULL && !tagged:
			a.Value = AttrValue{Kind: AttrBytes, Data: []byte{}}
		case scalar && !tagged:
			data := make([]byte, size)
			if C.H5Aread(attr, ftype, unsafe.Pointer(&data[0])) < 0 {
				return a, "", errorf("read attribute %q", a.Name)
			}
			a.Value = AttrValue{Kind: AttrBytes, Data: data}
		default:
			return readTyped(attr, ftype, space, a, scalar, count)
		}
		return a, "", nil
	case C.H5T_REFERENCE:
		if C.H5Tequal(ftype, C.scc_ref_obj()) <= 0 {
			if C.H5Tequal(ftype, C.scc_ref_reg()) > 0 {
				return a, "region reference (a selection of another dataset, which scc has no form for)", nil
			}
			return a, "reference type", nil
		}
		if C.H5Sget_simple_extent_type(space) == C.H5S_NULL {
			return a, "object references over a null dataspace", nil
		}
		refs := make([]C.hobj_ref_t, count)
		if count > 0 && C.H5Aread(attr, C.scc_ref_obj(), unsafe.Pointer(&refs[0])) < 0 {
			return a, "", errorf("read attribute %q", a.Name)
		}
		return refsValue(attr, a, refs, scalar)
	case C.H5T_VLEN:
		// Sequences of one object reference each (HDF5's dimension
		// lists: the dimension scale of each dimension) read as those
		// references; other sequences have no scc attribute form.
		base := C.H5Tget_super(ftype)
		if base < 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			return a, "variable-length sequence", nil
		}
		refBase := C.H5Tequal(base, C.scc_ref_obj()) > 0
		C.H5Tclose(base)
		if !refBase || C.H5Sget_simple_extent_type(space) == C.H5S_NULL {
			return a, "variable-length sequence", nil
		}
		refs := make([]C.hobj_ref_t, count)
		switch C.scc_read_vlen_refs(attr, space, C.size_t(count), (*C.hobj_ref_t)(unsafe.Pointer(unsafe.SliceData(refs)))) {
		case 0:
		case -2:
			return a, "variable-length sequences of object references, not each of one", nil
		default:
			return a, "", errorf("read attribute %q", a.Name)
		}
		a.RefSequences = true
		return refsValue(attr, a, refs, scalar)
	case C.H5T_TIME:
		return a, "time type", nil
	default:
		return a, fmt.Sprintf("type class %d", int(cls)), nil
	}
}

// refsValue is an attribute of object references as the paths of the
// objects: a string for a scalar, fixed-length strings for an array.
// Caller holds lib.
func refsValue(attr C.hid_t, a Attr, refs []C.hobj_ref_t, scalar bool) (Attr, string, error) {
	count := uint64(len(refs))
	names, err := refNames(attr, refs)
	if errors.Is(err, ErrTooLarge) {
		return a, err.Error(), nil
	}
	if err != nil {
		return a, "", err
	}
	a.ObjectRefs = true
	if scalar {
		a.Value = AttrValue{Kind: AttrString, Data: []byte(names[0])}
		return a, "", nil
	}
	longest, total := 1, 0
	for _, n := range names {
		longest = max(longest, len(n))
		total += len(n)
	}
	if uint64(longest)*count > MaxAttrBytes {
		return a, fmt.Sprintf("%d object references to paths of up to %d bytes are too large", count, longest), nil
	}
	data := make([]byte, uint64(longest)*count)
	for i, n := range names {
		copy(data[i*longest:], n)
	}
	a.Value = AttrValue{Kind: AttrNumeric, Type: Type{Class: String, Size: longest, Pad: PadNullPad, UTF8: true}, Data: data}
	return a, "", nil
}

// readTyped reads a scalar or 1-D attribute of a number, h5py's bool or
// complex, a 16-bit float or a described type (typeOf) as little-endian
// elements, HDF5 converting the byte order (per member of a compound).
// Caller holds lib.
func readTyped(attr, ftype, space C.hid_t, a Attr, scalar bool, count uint64) (Attr, string, error) {
	t := typeOf(ftype)
	C.H5Eclear2(C.H5E_DEFAULT)
	switch {
	case t.Class == Other:
		return a, t.Name + " type", nil
	case t.Vlen || t.Class == ObjRef || t.Class == String:
		return a, t.String() + " type", nil
	case !scalar && C.H5Sget_simple_extent_type(space) == C.H5S_NULL:
		return a, t.String() + " value over a null dataspace", nil
	}
	t = t.LittleEndian()
	mt, err := makeType(t, false)
	if err != nil {
		return a, t.String() + " type", nil
	}
	defer C.H5Tclose(mt)
	data := make([]byte, count*uint64(t.Size))
	if count > 0 && C.H5Aread(attr, mt, unsafe.Pointer(&data[0])) < 0 {
		return a, "", errorf("read attribute %q", a.Name)
	}
	zeroPadding(t, data)
	a.Value = AttrValue{Kind: AttrNumeric, Type: t, Scalar: scalar, Data: data}
	return a, "", nil
}

// readFixedStrings reads a 1-D attribute of fixed-length strings as an
// array of its string type, bytes as stored (padding included).
func readFixedStrings(attr, ftype, space C.hid_t, a Attr, count uint64) (Attr, string, error) {
	if C.H5Tis_variable_str(ftype) > 0 {
		return readVlenStrings(attr, ftype, space, a, count)
	}
	if C.H5Sget_simple_extent_type(space) == C.H5S_NULL {
		return a, "strings over a null dataspace", nil
	}
	t := typeOf(ftype)
	if t.Class != String {
		return a, t.String(), nil
	}
	data := make([]byte, count*uint64(t.Size))
	if count > 0 && C.H5Aread(attr, ftype, unsafe.Pointer(&data[0])) < 0 {
		return a, "", errorf("read attribute %q", a.Name)
	}
	a.Value = AttrValue{Kind: AttrNumeric, Type: t, Data: data}
	return a, "", nil
}

// MaxStringLen is the longest fixed-length string an array of
// variable-length strings becomes (scc's limit).
const MaxStringLen = 1 << 16

// readVlenStrings reads a 1-D attribute of variable-length strings as an
// array of fixed-length strings (NULLPAD, the attribute's character set)
// as long as the longest, which keeps every string: a C string holds no
// NUL, so the padding cannot eat one of its bytes. An array whose fixed
// form would exceed MaxAttrBytes, or whose longest string exceeds
// MaxStringLen, is left out and named.
func readVlenStrings(attr, ftype, space C.hid_t, a Attr, count uint64) (Attr, string, error) {
	if C.H5Sget_simple_extent_type(space) == C.H5S_NULL {
		return a, "strings over a null dataspace", nil
	}
	if count == 0 {
		return a, "empty array of variable-length strings", nil
	}
	mt := C.scc_vlen_like(ftype)
	if mt < 0 {
		return a, "", errorf("attribute %q: string type", a.Name)
	}
	defer C.H5Tclose(mt)
	ptrs := C.malloc(C.size_t(count) * C.size_t(unsafe.Sizeof(uintptr(0))))
	if ptrs == nil {
		return a, "", fmt.Errorf("%w: attribute %q: out of memory", ErrHDF5, a.Name)
	}
	defer C.free(ptrs)
	if C.scc_read_vlen_strs(attr, mt, C.size_t(count), (**C.char)(ptrs)) < 0 {
		return a, "", errorf("read attribute %q", a.Name)
	}
	defer C.scc_free_vlen_strs(C.size_t(count), (**C.char)(ptrs))
	strs := unsafe.Slice((**C.char)(ptrs), count)
	longest := 1
	lens := make([]int, count)
	for i, p := range strs {
		if p != nil {
			lens[i] = int(C.strlen(p))
			longest = max(longest, lens[i])
		}
	}
	if longest > MaxStringLen {
		return a, fmt.Sprintf("variable-length string of %d bytes (the longest fixed-length string is %d)", longest, MaxStringLen), nil
	}
	if uint64(longest)*count > MaxAttrBytes {
		return a, fmt.Sprintf("%d variable-length strings of up to %d bytes are too large", count, longest), nil
	}
	data := make([]byte, uint64(longest)*count)
	for i, p := range strs {
		if lens[i] > 0 {
			copy(data[i*longest:], unsafe.Slice((*byte)(unsafe.Pointer(p)), lens[i]))
		}
	}
	utf := C.H5Tget_cset(ftype) == C.H5T_CSET_UTF8
	if utf {
		for i := range strs {
			if !utf8.Valid(data[i*longest : i*longest+lens[i]]) {
				return a, "string is not valid UTF-8", nil
			}
		}
	}
	a.Value = AttrValue{Kind: AttrNumeric, Type: Type{Class: String, Size: longest, Pad: PadNullPad, UTF8: utf}, Data: data}
	return a, "", nil
}
