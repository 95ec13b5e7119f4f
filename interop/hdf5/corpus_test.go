package hdf5

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// writeCorpus writes a small corpus of HDF5 files the way h5py users write
// them — every layout, the filters libhdf5 ships, fill values, resized
// unlimited datasets, nested groups, both byte orders of every numeric
// type, empty datasets, the newest file format and attributes of many
// kinds — and then describes each file as h5py reads it: every dataset
// (numeric ones with their elements as little-endian bytes) and every
// attribute of the root group and of each dataset.
const writeCorpus = `
import sys, json, base64, h5py, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(11)
files = []
def new(name, **kw):
    p = "%s/%s.h5" % (out, name)
    files.append(p)
    return h5py.File(p, "w", **kw)

with new("layouts") as f:
    a = (np.arange(61*47, dtype="<u2").reshape(61, 47) // 5).astype("<u2")
    f.create_dataset("chunked", data=a, chunks=(16, 16), compression="gzip", shuffle=True)
    f.create_dataset("contiguous", data=rng.standard_normal((40, 33)))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    sid = h5py.h5s.create_simple((5, 7))
    h5py.Dataset(h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I32LE, sid, dcpl=dcpl))[...] = np.arange(35).reshape(5, 7) - 17
    g = f.create_group("level1/level2/level3")
    g.create_dataset("deep", data=np.arange(9, dtype="<i8") * -3)
    f["level1"].create_dataset("mid", data=np.linspace(0, 1, 11, dtype="<f4"))

with new("filters") as f:
    x = (np.arange(5000, dtype="<i4") * 37) % 1001
    f.create_dataset("gzip9", data=x, chunks=(512,), compression="gzip", compression_opts=9)
    f.create_dataset("shuffle_only", data=x, chunks=(512,), shuffle=True)
    f.create_dataset("fletcher", data=x, chunks=(512,), fletcher32=True)
    f.create_dataset("all3", data=x, chunks=(512,), fletcher32=True, shuffle=True, compression="gzip")
    f.create_dataset("scaleoffset", data=x, chunks=(512,), scaleoffset=0)
    f.create_dataset("gzip_f8", data=np.sin(np.arange(3000) / 10), chunks=(1000,), compression="gzip", shuffle=True)

with new("fills") as f:
    d = f.create_dataset("int", shape=(50, 50), chunks=(8, 8), dtype="<i2", fillvalue=-77, compression="gzip")
    d[3:11, 20:31] = 5
    d = f.create_dataset("nan", shape=(100,), chunks=(16,), dtype="<f4", fillvalue=np.nan)
    d[40:45] = 1.25
    d = f.create_dataset("grown", shape=(4, 3), maxshape=(None, None), chunks=(3, 2), dtype="<u4", fillvalue=9)
    d[...] = np.arange(12).reshape(4, 3)
    d.resize((10, 8))
    d[8:10, 6:8] = 1
    d.resize((9, 7))
    f.create_dataset("never", shape=(1000, 1000), chunks=(100, 100), dtype="<u8", fillvalue=2**63 + 5)

with new("types") as f:
    for t in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"):
        for e in ("<", ">"):
            if t in ("i1", "u1") and e == ">":
                continue
            info = np.iinfo(t) if t[0] in "iu" else np.finfo(t)
            v = np.array([info.min, info.max, 0, 1], dtype=e + t)
            f.create_dataset("%s%s" % ({"<": "le_", ">": "be_"}[e], t), data=v, chunks=(2,), compression="gzip")
            f.create_dataset("contig_%s%s" % ({"<": "le_", ">": "be_"}[e], t), data=v)

with new("empty") as f:
    f.create_dataset("zero", shape=(0,), maxshape=(None,), chunks=(10,), dtype="<i4")
    f.create_dataset("zero2", shape=(0, 5), maxshape=(None, 5), dtype="<f8", chunks=(4, 5), compression="gzip")
    f.create_dataset("zero_contig", shape=(0, 3), dtype="<u1")

with new("latest", libver="latest") as f:
    b = rng.integers(0, 60000, size=(33, 29), dtype="<u2")
    f.create_dataset("earray", data=b, chunks=(5, 6), maxshape=(None, 29), compression="gzip", shuffle=True)
    f.create_dataset("earray_last", data=b, chunks=(5, 6), maxshape=(33, None), compression="gzip")
    f.create_dataset("btree2", data=b, chunks=(5, 6), maxshape=(None, None), compression="gzip")
    f.create_dataset("farray", data=b, chunks=(5, 6), compression="gzip")
    f.attrs["format"] = "latest"

with new("attrs") as f:
    f.attrs["title"] = "corpus ✓"
    f.attrs["version"] = np.int64(3)
    f.attrs["bytes"] = np.bytes_(b"fixed")
    f.attrs["scale"] = np.array([0.5, 2.0], dtype=">f4")
    f.attrs["flag"] = True
    d = f.create_dataset("d", data=np.arange(6, dtype="<i2"))
    d.attrs["units"] = "m/s"
    d.attrs["range"] = np.array([-1, 1], dtype="<i8")
    d.attrs["u16"] = np.uint16(65535)
    d.attrs["void"] = np.void(b"\x01\x02")
    d.attrs["matrix"] = np.eye(2)
    d.attrs["names"] = np.array([b"a", b"b"])
    d.attrs["empty"] = np.array([], dtype="<f8")
    f.create_dataset("strings", data=["x", "yz"], dtype=h5py.string_dtype())

def attrs(obj):
    out = {}
    for k in obj.attrs:
        try:
            v = obj.attrs[k]
        except Exception as e:
            out[k] = {"kind": "unreadable"}
            continue
        if isinstance(v, str):
            out[k] = {"kind": "str", "value": v}
        elif isinstance(v, bytes):
            out[k] = {"kind": "str", "value": v.decode("utf-8", "replace")}
        else:
            a = np.asarray(v)
            if a.dtype.kind in "iubc" or (a.dtype.kind == "f" and a.dtype.itemsize in (4, 8)):
                le = a.astype(a.dtype.newbyteorder("<"))
                out[k] = {"kind": "num", "dtype": le.dtype.str, "scalar": a.ndim == 0, "shape": list(a.shape), "b64": base64.b64encode(le.tobytes()).decode()}
            elif a.dtype.kind == "V" and a.ndim == 0:
                out[k] = {"kind": "void", "b64": base64.b64encode(a.tobytes()).decode()}
            elif a.dtype.kind == "S" and a.ndim == 1:
                out[k] = {"kind": "strs", "dtype": a.dtype.str, "b64": base64.b64encode(a.tobytes()).decode()}
            else:
                out[k] = {"kind": "other"}
    return out

desc = []
for p in files:
    with h5py.File(p, "r") as f:
        ds = []
        def visit(name, obj):
            if not isinstance(obj, h5py.Dataset):
                return
            e = {"name": name, "attrs": attrs(obj), "shape": list(obj.shape)}
            dt = obj.dtype
            if obj.shape and (dt.kind in "iu" or (dt.kind == "f" and dt.itemsize in (4, 8))):
                a = obj[...]
                le = a.astype(a.dtype.newbyteorder("<"))
                e["dtype"] = le.dtype.str
                e["data"] = "%s.%d.bin" % (p, len(ds))
                le.tofile(e["data"])
            ds.append(e)
        f.visititems(visit)
        desc.append({"file": p, "attrs": attrs(f), "datasets": ds})
json.dump(desc, open(out + "/corpus.json", "w"))
`

type corpusAttr struct {
	Kind   string   `json:"kind"`
	Value  string   `json:"value"`
	Dtype  string   `json:"dtype"`
	Scalar bool     `json:"scalar"`
	Shape  []uint64 `json:"shape"`
	B64    string   `json:"b64"`
}

type corpusFile struct {
	File     string                `json:"file"`
	Attrs    map[string]corpusAttr `json:"attrs"`
	Datasets []struct {
		Name  string                `json:"name"`
		Attrs map[string]corpusAttr `json:"attrs"`
		Shape []uint64              `json:"shape"`
		Dtype string                `json:"dtype"`
		Data  string                `json:"data"`
	} `json:"datasets"`
}

// checkAttrs compares the attributes h5py reads on one object with what
// the import made of them: each numeric (bool and complex included),
// string, fixed-length string array or opaque one h5py reads
// is in scc with the same type and value or named in notes, and every
// other kind is named in notes.
func checkAttrs(t *testing.T, what string, want map[string]corpusAttr, got []engine.Attr, notes []string) (imported, left int) {
	t.Helper()
	byName := map[string]engine.AttrValue{}
	for _, a := range got {
		byName[a.Name] = a.Value
	}
	noted := func(name string) bool {
		for _, n := range notes {
			if strings.HasPrefix(n, name+": ") {
				return true
			}
		}
		return false
	}
	for name, w := range want {
		v, ok := byName[name]
		if !ok {
			if !noted(name) {
				t.Errorf("%s: attribute %q neither imported nor named as left behind", what, name)
			}
			left++
			continue
		}
		imported++
		var same bool
		switch w.Kind {
		case "num":
			b, _ := base64.StdEncoding.DecodeString(w.B64)
			kind := engine.AttrArray
			if w.Scalar {
				kind = engine.AttrScalar
			}
			same = v.Kind() == kind && dtypeOf(v.Type()) == strings.Replace(w.Dtype, "|", "<", 1) && bytes.Equal(v.Bytes(), b) &&
				(w.Scalar || equalU64(v.Shape(), w.Shape))
		case "str":
			s, err := v.Str()
			same = err == nil && s == w.Value
		case "void":
			b, _ := base64.StdEncoding.DecodeString(w.B64)
			bs, err := v.ByteString()
			same = err == nil && bytes.Equal(bs, b)
		case "strs":
			b, _ := base64.StdEncoding.DecodeString(w.B64)
			same = v.Kind() == engine.AttrArray && v.Type().IsString() && fmt.Sprintf("|S%d", v.Type().Size()) == w.Dtype && bytes.Equal(v.Bytes(), b)
		}
		if !same {
			t.Errorf("%s: attribute %q imported as %v, h5py reads %+v", what, name, v, w)
		}
	}
	if len(got) != imported {
		t.Errorf("%s: %d attributes in scc, %d of them read by h5py", what, len(got), imported)
	}
	return imported, left
}

// TestImportCorpus imports every file of a corpus h5py writes at test
// time and compares every dataset element by element, and every
// attribute, with h5py's reading of the same file. Datasets scc cannot
// take must be skipped with a reason; anything else is a failure.
func TestImportCorpus(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	runPython(t, writeCorpus, dir)
	b, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []corpusFile
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	var imported, skipped, failed, attrsIn, attrsLeft int
	for _, c := range corpus {
		name := strings.TrimSuffix(filepath.Base(c.File), ".h5")
		ok := t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name+".scc")
			rep, err := ImportFile(ctx, c.File, out, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("report:\n%s", rep)
			f, err := engine.Open(ctx, out, &engine.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			testfile.CheckAtCleanup(t, out)
			defer f.Close(ctx)
			in, left := checkAttrs(t, name+" root", c.Attrs, testfile.Attrs(t, f), rep.RootAttrNotes)
			attrsIn, attrsLeft = attrsIn+in, attrsLeft+left
			reports := map[string]DatasetReport{}
			for _, d := range rep.Datasets {
				reports[d.Name] = d
			}
			reasons := map[string]string{}
			for _, s := range rep.Skipped {
				reasons[strings.TrimPrefix(s.Path, "/")] = s.Reason
			}
			for _, d := range c.Datasets {
				if d.Data == "" {
					// Not numeric for h5py either: scc must import it as
					// variable-length data (TestImportVlenFromH5py checks
					// such values) or skip it and say why.
					if _, ok := reports[d.Name]; ok {
						if ds, err := f.OpenDataset(ctx, d.Name, nil); err != nil || ds.Layout() != engine.Vlen {
							t.Errorf("%s: imported, but not as variable-length data (%v)", d.Name, err)
							failed++
						} else {
							ds.Close(ctx)
						}
						continue
					}
					if reasons[d.Name] == "" {
						t.Errorf("%s: neither imported nor skipped with a reason", d.Name)
						failed++
					} else {
						skipped++
					}
					continue
				}
				ds, err := f.OpenDataset(ctx, d.Name, nil)
				if err != nil {
					t.Errorf("%s: %v (skip reason %q)", d.Name, err, reasons[d.Name])
					failed++
					continue
				}
				want, err := os.ReadFile(d.Data)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(want))
				if !equalU64(ds.Shape(), d.Shape) || dtypeOf(ds.Type()) != strings.Replace(d.Dtype, "|", "<", 1) {
					t.Errorf("%s: %v %v, h5py reads %v %s", d.Name, ds.Type(), ds.Shape(), d.Shape, d.Dtype)
					failed++
				} else if err := ds.Read(ctx, engine.Box(make([]uint64, len(d.Shape)), d.Shape), got); err != nil {
					t.Errorf("%s: %v", d.Name, err)
					failed++
				} else if !bytes.Equal(got, want) {
					t.Errorf("%s: elements differ from h5py's reading", d.Name)
					failed++
				} else {
					imported++
				}
				in, left := checkAttrs(t, d.Name, d.Attrs, testfile.Attrs(t, ds), reports[d.Name].AttrNotes)
				attrsIn, attrsLeft = attrsIn+in, attrsLeft+left
				ds.Close(ctx)
			}
		})
		if !ok {
			failed++
		}
	}
	t.Logf("corpus of %d files: %d datasets imported equal to h5py's reading, %d refused with a reason, %d failed; %d attributes imported, %d left behind with a reason",
		len(corpus), imported, skipped, failed, attrsIn, attrsLeft)
}
