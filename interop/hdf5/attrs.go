package hdf5

import (
	"context"
	"errors"
	"fmt"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// Attribute mapping. scc attributes are typed scalars and arrays of any
// shape of the engine's element types, nulls, UTF-8 strings and byte
// strings; they become:
//
//	scalar of T     HDF5 scalar dataspace, T's little-endian predefined type;
//	                for bool, complex and fixed-length strings h5py's
//	                encodings, as their datasets have them: an int8 enum
//	                {FALSE=0, TRUE=1}, a compound {r, i} of two floats, a
//	                fixed-length string of the type's length, padding and
//	                character set
//	array of T      simple dataspace of its shape (1-D, length 0 allowed,
//	                or N-D, elements row-major), same type
//	null of T       null dataspace of T's type (as above); a null of
//	                text a null variable-length UTF-8 string (h5py's
//	                Empty of str)
//	string          scalar variable-length UTF-8 string (fixed-length,
//	                NULLPAD, when it contains NUL, which a C string cannot
//	                hold)
//	byte string     scalar opaque value of its length, untagged, as h5py
//	                writes numpy.void (h5py reads it back as numpy.void;
//	                .tobytes() gives the bytes; a tagged opaque would not
//	                convert to h5py's untagged type);
//	                the empty byte string is an opaque over a null dataspace
//
// Import reads those kinds back whoever wrote them: integers and IEEE
// floats of 1, 2, 4 or 8 bytes in either byte order (scalar or of any
// shape, as every kind below that has elements; a null dataspace of any
// of these types is a null of that type, of a variable-length string a
// null of text),
// h5py's bool and complex (either byte order), scalar
// variable- and fixed-length strings in UTF-8 or ASCII as text (fixed ones
// lose their padding: NUL-terminated up to the first NUL, NUL- and
// space-padded trailing padding stripped), arrays of fixed-length
// strings as arrays of that string type (engine.FixedStringsAttr's kind),
// arrays of variable-length strings (h5py's lists of str) as arrays
// of NULLPAD fixed-length strings as long as the longest (no string
// loses a byte: a C string holds no NUL), and opaque scalars (any tag) as
// byte strings (a tagged opaque keeps its type, below). Scalars and
// arrays of float16, enums, tagged opaque types, bitfields, array types
// and compounds (scc's described types) come in as attributes of that
// type, little-endian, and go out as the same HDF5 types. Everything
// else — compounds with variable-length members, references,
// variable-length sequences, names or values scc refuses (an empty or over-long name, a
// value over engine.MaxAttrValueBytes, text that is not UTF-8) — is left
// behind and listed in the report with the reason, and so is an attribute
// libhdf5 cannot open or read (a damaged message), with its error.

// h5Attrs maps scc attributes (as Attrs lists them, with its error) onto
// the binding's values.
func h5Attrs(attrs []engine.Attr, err error) ([]h5.Attr, error) {
	if err != nil {
		return nil, err
	}
	out := make([]h5.Attr, 0, len(attrs))
	for _, a := range attrs {
		v := a.Value
		var hv h5.AttrValue
		switch v.Kind() {
		case engine.AttrScalar, engine.AttrArray:
			t := v.Type()
			if !h5Maps(t) {
				return nil, fmt.Errorf("%w: attribute %q of type %v (HDF5 export takes the numeric, bool, complex and fixed-length string types)", ErrUnsupported, a.Name, t)
			}
			hv = h5.AttrValue{Kind: h5.AttrNumeric, Type: h5Type(v.Type()), Scalar: v.Kind() == engine.AttrScalar, Data: v.Bytes()}
			if dims := v.Shape(); len(dims) > 1 {
				hv.Dims = dims
			}
		case engine.AttrNull:
			t := v.Type()
			if t == 0 {
				// Text: h5py's str, a variable-length UTF-8 string.
				hv = h5.AttrValue{Kind: h5.AttrNull, Type: h5.Type{Class: h5.String, Size: 1, Vlen: true, UTF8: true}}
				break
			}
			if !h5Maps(t) {
				return nil, fmt.Errorf("%w: null attribute %q of type %v (HDF5 export takes the numeric, bool, complex and fixed-length string types)", ErrUnsupported, a.Name, t)
			}
			hv = h5.AttrValue{Kind: h5.AttrNull, Type: h5Type(t)}
		case engine.AttrString:
			hv = h5.AttrValue{Kind: h5.AttrString, Data: v.Bytes()}
		case engine.AttrBytes:
			hv = h5.AttrValue{Kind: h5.AttrBytes, Data: v.Bytes()}
		default:
			return nil, fmt.Errorf("%w: attribute %q of kind %v", ErrUnsupported, a.Name, v.Kind())
		}
		out = append(out, h5.Attr{Name: a.Name, Value: hv})
	}
	return out, nil
}

// sccAttr maps one HDF5 attribute value onto scc's, or says why not.
func sccAttr(v h5.AttrValue) (engine.AttrValue, string) {
	switch v.Kind {
	case h5.AttrNumeric:
		t, ok := sccType(v.Type)
		if !ok {
			return engine.AttrValue{}, fmt.Sprintf("element type %v", v.Type)
		}
		kind := engine.AttrArray
		if v.Scalar {
			kind = engine.AttrScalar
		}
		a := engine.RawAttr(kind, t, v.Data)
		if v.Dims != nil {
			var err error
			if a, err = a.WithShape(v.Dims...); err != nil {
				return engine.AttrValue{}, err.Error()
			}
		}
		return a, ""
	case h5.AttrNull:
		if v.Type.Class == h5.String && v.Type.Vlen {
			return engine.NullAttr(0), ""
		}
		t, ok := sccType(v.Type)
		if !ok {
			return engine.AttrValue{}, fmt.Sprintf("null of element type %v", v.Type)
		}
		return engine.NullAttr(t), ""
	case h5.AttrString:
		return engine.StringAttr(string(v.Data)), ""
	case h5.AttrBytes:
		return engine.BytesAttr(v.Data), ""
	}
	return engine.AttrValue{}, fmt.Sprintf("kind %d", v.Kind)
}

// attrSetter is a File or a Dataset.
type attrSetter interface {
	SetAttr(ctx context.Context, name string, v engine.AttrValue) error
}

// importAttrs sets the mappable attributes on dst and returns the ones
// left behind as "name: why". An attribute whose name the engine refuses
// is left behind too, and refused under strict.
func importAttrs(ctx context.Context, dst attrSetter, attrs []h5.Attr, skipped []h5.Skipped, strict bool) ([]string, error) {
	var left []string
	for _, s := range skipped {
		left = append(left, fmt.Sprintf("%s: %s", s.Name, s.Why))
	}
	for _, a := range attrs {
		if err := attrNameErr(a.Name); err != nil {
			if strict {
				return left, fmt.Errorf("(strict): %w", err)
			}
			left = append(left, fmt.Sprintf("%q: %v", a.Name, err))
			continue
		}
		v, why := sccAttr(a.Value)
		if why == "" {
			err := dst.SetAttr(ctx, a.Name, v)
			if err == nil && a.ObjectRefs {
				// The mark that the strings were object references.
				mark := "object"
				if a.RefSequences {
					mark = "object-sequence"
				}
				err = dst.SetAttr(ctx, ReferenceAttr+":"+a.Name, engine.StringAttr(mark))
			}
			switch {
			case err == nil:
				continue
			case isInvalid(err):
				why = err.Error()
			default:
				return left, err
			}
		}
		left = append(left, fmt.Sprintf("%s: %s", a.Name, why))
	}
	return left, nil
}

func isInvalid(err error) bool { return errors.Is(err, engine.ErrInvalid) }
