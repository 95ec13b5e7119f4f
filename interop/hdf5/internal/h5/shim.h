// shim.h: C helpers for the Go binding. HDF5 exposes its predefined types
// and property classes as macros over global variables (which cgo cannot
// name) and reports errors on a stack; these wrappers give Go plain
// functions and one string per failure.
#ifndef SCC_H5_SHIM_H
#define SCC_H5_SHIM_H

#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <hdf5.h>

static hsize_t scc_unlimited(void) { return H5S_UNLIMITED; }
static hid_t scc_dcpl_class(void) { return H5P_DATASET_CREATE; }
static hid_t scc_lcpl_class(void) { return H5P_LINK_CREATE; }
static hid_t scc_dapl_class(void) { return H5P_DATASET_ACCESS; }

// scc_le_type returns the little-endian predefined type for class (0 int,
// 1 uint, 2 float) and size, or -1.
static hid_t scc_le_type(int cls, size_t size) {
	switch (cls) {
	case 0:
		switch (size) {
		case 1: return H5T_STD_I8LE;
		case 2: return H5T_STD_I16LE;
		case 4: return H5T_STD_I32LE;
		case 8: return H5T_STD_I64LE;
		}
		break;
	case 1:
		switch (size) {
		case 1: return H5T_STD_U8LE;
		case 2: return H5T_STD_U16LE;
		case 4: return H5T_STD_U32LE;
		case 8: return H5T_STD_U64LE;
		}
		break;
	case 2:
		switch (size) {
		case 4: return H5T_IEEE_F32LE;
		case 8: return H5T_IEEE_F64LE;
		}
		break;
	}
	return -1;
}

// scc_make_type returns a new type the caller closes, or -1. cls: 0 int,
// 1 uint, 2 float (little-endian, size bytes); 4 h5py's boolean (an int8
// enum FALSE=0, TRUE=1); 5 h5py's complex (a compound {r, i} of two
// little-endian floats of size/2 bytes); 6 a fixed-length string of size
// bytes with padding pad (H5T_str_t) in charset utf8 ? UTF-8 : ASCII.
// vlen wraps the type in a variable-length sequence of it.
static hid_t scc_make_type(int cls, size_t size, int pad, int utf8, int vlen) {
	hid_t t = -1;
	switch (cls) {
	case 0: case 1: case 2: {
		hid_t b = scc_le_type(cls, size);
		if (b < 0) return -1;
		t = H5Tcopy(b);
		break;
	}
	case 4: {
		signed char v;
		if (size != 1) return -1;
		t = H5Tenum_create(H5T_STD_I8LE);
		if (t < 0) return -1;
		v = 0;
		if (H5Tenum_insert(t, "FALSE", &v) < 0) { H5Tclose(t); return -1; }
		v = 1;
		if (H5Tenum_insert(t, "TRUE", &v) < 0) { H5Tclose(t); return -1; }
		break;
	}
	case 5: {
		hid_t f = scc_le_type(2, size / 2);
		if (f < 0 || size % 2) return -1;
		t = H5Tcreate(H5T_COMPOUND, size);
		if (t < 0) return -1;
		if (H5Tinsert(t, "r", 0, f) < 0 || H5Tinsert(t, "i", size / 2, f) < 0) { H5Tclose(t); return -1; }
		break;
	}
	case 6:
		if (size == 0) return -1;
		t = H5Tcopy(H5T_C_S1);
		if (t < 0) return -1;
		if (H5Tset_size(t, size) < 0 || H5Tset_strpad(t, (H5T_str_t)pad) < 0 ||
		    H5Tset_cset(t, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII) < 0) { H5Tclose(t); return -1; }
		break;
	default:
		return -1;
	}
	if (t < 0 || !vlen) return t;
	hid_t v = H5Tvlen_create(t);
	H5Tclose(t);
	return v;
}

// scc_bool_enum reports whether t is h5py's boolean: an enum of a 1-byte
// integer with exactly the members FALSE=0 and TRUE=1.
static int scc_bool_enum(hid_t t) {
	if (H5Tget_class(t) != H5T_ENUM || H5Tget_size(t) != 1 || H5Tget_nmembers(t) != 2) return 0;
	int ok = 1;
	for (unsigned i = 0; i < 2 && ok; i++) {
		char *name = H5Tget_member_name(t, i);
		signed char v = -1;
		if (!name || H5Tget_member_value(t, i, &v) < 0) ok = 0;
		else if (!((strcmp(name, "FALSE") == 0 && v == 0) || (strcmp(name, "TRUE") == 0 && v == 1))) ok = 0;
		if (name) H5free_memory(name);
	}
	return ok;
}

// scc_complex_size returns the size of t when it is h5py's complex: a
// compound of exactly the members r at 0 and i at size/2, both IEEE
// floats of size/2 bytes in the same byte order (1 big-endian, 0 little
// in *be); 0 otherwise.
static size_t scc_complex_size(hid_t t, int *be) {
	if (H5Tget_class(t) != H5T_COMPOUND || H5Tget_nmembers(t) != 2) return 0;
	size_t size = H5Tget_size(t);
	if (size != 8 && size != 16) return 0;
	size_t ok = size;
	int order = -1;
	for (unsigned i = 0; i < 2 && ok; i++) {
		char *name = H5Tget_member_name(t, i);
		hid_t m = H5Tget_member_type(t, i);
		size_t off = H5Tget_member_offset(t, i);
		const char *want = i == 0 ? "r" : "i";
		if (!name || m < 0 || strcmp(name, want) != 0 || off != i * (size / 2) ||
		    H5Tget_class(m) != H5T_FLOAT || H5Tget_size(m) != size / 2) ok = 0;
		else {
			hid_t le = scc_le_type(2, size / 2);
			hid_t be_t = size == 8 ? H5T_IEEE_F32BE : H5T_IEEE_F64BE;
			int o = H5Tequal(m, le) > 0 ? 0 : H5Tequal(m, be_t) > 0 ? 1 : -1;
			if (o < 0 || (order >= 0 && o != order)) ok = 0;
			order = o;
		}
		if (name) H5free_memory(name);
		if (m >= 0) H5Tclose(m);
	}
	*be = order == 1;
	return ok;
}

// scc_write_vlen writes n sequences to the selection fs of d: lens[i]
// elements of type base each, packed one after the other in data.
static herr_t scc_write_vlen(hid_t d, hid_t mt, hid_t ms, hid_t fs, size_t n, const size_t *lens, size_t esize, const unsigned char *data) {
	hvl_t *v = malloc(n * sizeof(hvl_t));
	if (!v) return -1;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		v[i].len = lens[i];
		v[i].p = lens[i] ? (void *)(data + off) : NULL;
		off += lens[i] * esize;
	}
	herr_t rc = H5Dwrite(d, mt, ms, fs, H5P_DEFAULT, v);
	free(v);
	return rc;
}

// scc_write_vlen_strs writes n strings to the selection fs of d: lens[i]
// bytes each, packed one after the other in data, none holding NUL.
static herr_t scc_write_vlen_strs(hid_t d, hid_t mt, hid_t ms, hid_t fs, size_t n, const size_t *lens, const unsigned char *data) {
	size_t total = 0;
	for (size_t i = 0; i < n; i++) total += lens[i] + 1;
	char **v = malloc(n * sizeof(char *));
	char *buf = malloc(total ? total : 1);
	if (!v || !buf) { free(v); free(buf); return -1; }
	size_t off = 0, in = 0;
	for (size_t i = 0; i < n; i++) {
		v[i] = buf + off;
		if (lens[i]) memcpy(buf + off, data + in, lens[i]);
		buf[off + lens[i]] = 0;
		off += lens[i] + 1;
		in += lens[i];
	}
	herr_t rc = H5Dwrite(d, mt, ms, fs, H5P_DEFAULT, v);
	free(v);
	free(buf);
	return rc;
}

static hid_t scc_ref_obj(void) { return H5T_STD_REF_OBJ; }
static hid_t scc_ref_reg(void) { return H5T_STD_REF_DSETREG; }

// scc_ref_name writes the path of the object ref points to into buf (size
// bytes, NUL-terminated) and returns its length, -1 on failure; the null
// reference (address 0) has the empty path.
static ssize_t scc_ref_name(hid_t loc, const hobj_ref_t *ref, char *buf, size_t size) {
	if (*ref == 0) {
		if (size) buf[0] = 0;
		return 0;
	}
	return H5Rget_name(loc, H5R_OBJECT, ref, buf, size);
}

// scc_vlen_str is a variable-length C string type in UTF-8 or ASCII.
static hid_t scc_vlen_str(int utf8) {
	hid_t t = H5Tcopy(H5T_C_S1);
	if (t < 0) return -1;
	if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII) < 0) { H5Tclose(t); return -1; }
	return t;
}

// scc_read_vlen reads the selection fs of d, n variable-length sequences
// of esize-byte elements (or, str, C strings), and packs them into out
// (cap bytes): lens[i] elements each, *got bytes in all. With out NULL
// it only measures: *got is the bytes the sequences hold. It returns -1 if
// the read fails, -2 if the data exceeds cap. The library's buffers are
// reclaimed either way.
static herr_t scc_read_vlen(hid_t d, hid_t mt, hid_t ms, hid_t fs, size_t n, size_t esize, int str,
                            size_t *lens, unsigned char *out, size_t cap, size_t *got) {
	size_t each = str ? sizeof(char *) : sizeof(hvl_t);
	void *v = calloc(n, each);
	if (!v) return -1;
	*got = 0;
	if (H5Dread(d, mt, ms, fs, H5P_DEFAULT, v) < 0) { free(v); return -1; }
	herr_t rc = 0;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		const void *p;
		size_t bytes;
		if (str) {
			const char *s = ((char **)v)[i];
			p = s;
			bytes = s ? strlen(s) : 0;
			lens[i] = bytes;
		} else {
			hvl_t h = ((hvl_t *)v)[i];
			p = h.p;
			bytes = h.p ? h.len * esize : 0;
			if (h.p && bytes / esize != h.len) { rc = -2; break; }
			lens[i] = h.p ? h.len : 0;
		}
		if (!out) { off += bytes; continue; } // measuring only
		if (bytes > cap - off) { rc = -2; break; }
		if (bytes) memcpy(out + off, p, bytes);
		off += bytes;
	}
	*got = off;
	H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, v);
	free(v);
	return rc;
}

// scc_quiet switches off HDF5's printing of error stacks to stderr on the
// calling thread (a thread-safe build keeps the setting, like the error
// stack itself, per thread): errors come back to Go as values
// (scc_error_string). The Go side calls it on every locked entry.
static __thread int scc_quieted;
static void scc_quiet(void) {
	if (!scc_quieted) {
		H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
		scc_quieted = 1;
	}
}

typedef struct { char *buf; size_t len, cap; } scc_strbuf;

static void scc_append(scc_strbuf *b, const char *s) {
	size_t n = strlen(s);
	if (b->len + n + 1 > b->cap) {
		size_t c = (b->cap ? b->cap * 2 : 256);
		while (c < b->len + n + 1) c *= 2;
		char *nb = realloc(b->buf, c);
		if (!nb) return;
		b->buf = nb; b->cap = c;
	}
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = 0;
}

typedef struct { const char *inner, *outer; int pline, io; } scc_ends;

static herr_t scc_walk(unsigned n, const H5E_error2_t *e, void *data) {
	scc_ends *ends = data;
	// The stack runs from where the error was found up to the API call:
	// a failure of the file's I/O is found in the file driver, below any
	// filter; a filter's failure passes through the pipeline (H5E_PLINE)
	// above where it was found.
	if (n == 0) ends->io = e->maj_num == H5E_IO || e->maj_num == H5E_VFL || e->maj_num == H5E_FILE;
	if (e->maj_num == H5E_PLINE) ends->pline = 1;
	if (!e->desc || !*e->desc) return 0;
	if (!ends->inner) ends->inner = e->desc;
	ends->outer = e->desc;
	return 0;
}

// scc_error_string returns the current error stack as one malloc'ed string
// and clears the stack. A stack runs from the API call down through every
// internal function to where the error was found, often 700 characters of
// repetition; the API call's description (what failed) and the innermost
// one (why: "required filter 'lzf' is not registered") say it. The caller
// frees the string. *pline is set when the stack went through the filter
// pipeline and not through file I/O: a chunk its filters (a plugin, or a
// filter that is not registered) could not decode.
static char *scc_error_string(int *pline) {
	scc_ends ends = {0};
	scc_strbuf b = {0};
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, scc_walk, &ends);
	if (ends.outer) scc_append(&b, ends.outer);
	if (ends.inner && ends.inner != ends.outer && strcmp(ends.inner, ends.outer) != 0) {
		scc_append(&b, ": ");
		scc_append(&b, ends.inner);
	}
	H5Eclear2(H5E_DEFAULT);
	*pline = ends.pline && !ends.io;
	return b.buf;
}

// scc_list_datasets collects the paths of every dataset reachable by hard
// links from the root group, each followed by a NUL, into one malloc'ed
// buffer. Soft and external links are skipped (they may point outside the
// file or form cycles).
typedef struct { scc_strbuf b, bad; size_t n; H5O_type_t want; } scc_list;

static void scc_append_name(scc_strbuf *b, const char *name) {
	scc_append(b, name);
	if (b->buf) { b->len++; } // keep the NUL as separator
}

static herr_t scc_visit(hid_t g, const char *name, const H5L_info_t *info, void *data) {
	scc_list *l = data;
	if (info->type != H5L_TYPE_HARD) return 0;
	// The object's kind from its header, without opening it: an object
	// whose messages do not decode (a damaged datatype) is listed as
	// unreadable and the walk goes on, so that it alone is left out.
	H5O_info_t oi;
	if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
		H5Eclear2(H5E_DEFAULT);
		scc_append_name(&l->bad, name);
		return 0;
	}
	if (oi.type == l->want) {
		scc_append_name(&l->b, name);
		l->n++;
	}
	return 0;
}

// scc_list_kind lists the objects of kind want into out, and into bad the
// objects whose headers could not be read.
static herr_t scc_list_kind(hid_t file, H5O_type_t want, char **out, size_t *len, char **bad, size_t *badlen) {
	scc_list l = {0};
	l.want = want;
	herr_t rc = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, scc_visit, &l);
	*out = l.b.buf;
	*len = l.b.len;
	*bad = l.bad.buf;
	*badlen = l.bad.len;
	return rc < 0 ? -1 : 0;
}

static herr_t scc_list_datasets(hid_t file, char **out, size_t *len, char **bad, size_t *badlen) {
	return scc_list_kind(file, H5O_TYPE_DATASET, out, len, bad, badlen);
}

// scc_list_groups is scc_list_datasets for groups (the root left out).
static herr_t scc_list_groups(hid_t file, char **out, size_t *len, char **bad, size_t *badlen) {
	return scc_list_kind(file, H5O_TYPE_GROUP, out, len, bad, badlen);
}

// scc_object_info fails as reading the header of the object at name does.
static herr_t scc_object_info(hid_t file, const char *name) {
	H5O_info_t oi;
	return H5Oget_info_by_name2(file, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT);
}

// scc_num_attrs returns the number of attributes on an object, or -1.
static long long scc_num_attrs(hid_t obj) {
	H5O_info_t info;
	if (H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) < 0) return -1;
	return (long long)info.num_attrs;
}

// scc_filter_registered says whether filter id is registered with the
// library, without the plugin search H5Zfilter_avail starts for one that
// is not.
static int scc_filter_registered(int id) {
	unsigned flags;
	if (H5Zget_filter_info((H5Z_filter_t)id, &flags) < 0) {
		H5Eclear2(H5E_DEFAULT);
		return 0;
	}
	return 1;
}

typedef int (*scc_plugin_type_fn)(void);
typedef const void *(*scc_plugin_info_fn)(void);

// scc_register_plugin loads the plugin library at path and registers the
// filter it provides unless one of that id is registered already. It
// returns the filter id registered, 0 if the library is not a filter
// plugin or its filter was registered, -1 if it cannot be loaded (*why
// says why; the caller frees it). A registered plugin stays loaded: the
// library calls into it.
static int scc_register_plugin(const char *path, char **why) {
	*why = NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		*why = strdup(e ? e : "dlopen failed");
		return -1;
	}
	scc_plugin_type_fn gt = (scc_plugin_type_fn)dlsym(h, "H5PLget_plugin_type");
	scc_plugin_info_fn gi = (scc_plugin_info_fn)dlsym(h, "H5PLget_plugin_info");
	if (gt == NULL || gi == NULL || gt() != H5PL_TYPE_FILTER) {
		dlclose(h);
		return 0;
	}
	const H5Z_class2_t *cls = (const H5Z_class2_t *)gi();
	if (cls == NULL || cls->version != H5Z_CLASS_T_VERS || scc_filter_registered(cls->id)) {
		dlclose(h);
		return 0;
	}
	if (H5Zregister(cls) < 0) {
		H5Eclear2(H5E_DEFAULT);
		dlclose(h);
		*why = strdup("H5Zregister failed");
		return -1;
	}
	return cls->id;
}

// scc_half_type returns a new 16-bit IEEE-style float type the caller
// closes, or -1: binary16 (bf 0) or bfloat16 (bf 1), in big-endian order
// when be. libhdf5 1.10 has no predefined 16-bit float; h5py builds
// numpy's float16 this way (a copy of F32LE with the fields, size and
// exponent bias of binary16), and bfloat16 is the top half of a float32.
static hid_t scc_half_type(int bf, int be) {
	hid_t t = H5Tcopy(H5T_IEEE_F32LE);
	if (t < 0) return -1;
	size_t epos = bf ? 7 : 10, esize = bf ? 8 : 5, msize = bf ? 7 : 10, bias = bf ? 127 : 15;
	if (H5Tset_fields(t, 15, epos, esize, 0, msize) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, bias) < 0 ||
	    (be && H5Tset_order(t, H5T_ORDER_BE) < 0)) { H5Tclose(t); return -1; }
	return t;
}

// scc_half_kind reports which 16-bit float t is: 1 binary16, 2 bfloat16,
// 0 neither (another 2-byte float layout, which is not mapped).
static int scc_half_kind(hid_t t) {
	size_t spos, epos, esize, mpos, msize;
	if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 2 || H5Tget_offset(t) != 0 || H5Tget_precision(t) != 16) return 0;
	if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0) return 0;
	if (H5Tget_norm(t) != H5T_NORM_IMPLIED || spos != 15 || mpos != 0) return 0;
	size_t bias = H5Tget_ebias(t);
	if (epos == 10 && esize == 5 && msize == 10 && bias == 15) return 1;
	if (epos == 7 && esize == 8 && msize == 7 && bias == 127) return 2;
	return 0;
}

// scc_bitfield_type returns a new little-endian bitfield of size bytes.
static hid_t scc_bitfield_type(size_t size) {
	hid_t b;
	switch (size) {
	case 1: b = H5T_STD_B8LE; break;
	case 2: b = H5T_STD_B16LE; break;
	case 4: b = H5T_STD_B32LE; break;
	case 8: b = H5T_STD_B64LE; break;
	default: return -1;
	}
	return H5Tcopy(b);
}

// scc_opaque_type returns a new opaque type of size bytes tagged tag
// (untagged when tag is empty, as h5py's numpy void).
static hid_t scc_opaque_type(size_t size, const char *tag) {
	hid_t t = H5Tcreate(H5T_OPAQUE, size);
	if (t < 0) return -1;
	if (tag[0] && H5Tset_tag(t, tag) < 0) { H5Tclose(t); return -1; }
	return t;
}

// scc_member_name copies member i's name of the compound or enum t into
// buf (size bytes) and returns its length, -1 if it cannot be read, -2
// if it does not fit.
static ssize_t scc_member_name(hid_t t, unsigned i, char *buf, size_t size) {
	char *n = H5Tget_member_name(t, i);
	if (!n) return -1;
	size_t l = strlen(n);
	if (l >= size) { H5free_memory(n); return -2; }
	memcpy(buf, n, l + 1);
	H5free_memory(n);
	return (ssize_t)l;
}

// scc_tag copies an opaque type's tag like scc_member_name.
static ssize_t scc_tag(hid_t t, char *buf, size_t size) {
	char *n = H5Tget_tag(t);
	if (!n) return -1;
	size_t l = strlen(n);
	if (l >= size) { H5free_memory(n); return -2; }
	memcpy(buf, n, l + 1);
	H5free_memory(n);
	return (ssize_t)l;
}

#endif
