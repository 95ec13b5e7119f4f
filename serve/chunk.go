package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// errNoChunk: the chunk is not stored (or holds only the fill value); the
// reader reads it as the fill value.
var errNoChunk = errors.New("chunk not stored")

// serveKey answers the request for key from v.
func (s *Server) serveKey(w http.ResponseWriter, r *http.Request, v *view, key string) {
	h := w.Header()
	h["Cache-Control"] = hdrNoCache
	if key == "" {
		s.serveWeb(w, r, v, "", true)
		return
	}
	if rest, ok := strings.CutPrefix(key, WebPrefix[1:]); ok {
		s.serveWeb(w, r, v, rest, false)
		return
	}
	if b := v.blobs[key]; b != nil {
		h["Content-Type"] = hdrJSON
		serveContent(w, r, b.data, b.etag, b.mod, b.gzipped)
		return
	}
	a, coords, ok := s.chunkOf(v, key)
	if !ok {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	if notModified(w, r, a, coords) {
		return
	}
	if a.copy && a.wrap == "" && !a.plain {
		s.serveShared(w, r, a, coords, key)
		return
	}
	// The chunk is held whole until it is sent: its bytes count against
	// the bound of what all responses hold, twice when it may be gzipped
	// (the gzipped copy is smaller than the chunk, or dropped).
	n := int64(a.chunkBytes)
	gz := a.plain && wantsGzip(r)
	if gz {
		n *= 2
	}
	n = min(n, s.maxBytes)
	if err := s.bytes.Acquire(r.Context(), n); err != nil {
		return // the client is gone
	}
	defer s.bytes.Release(n)
	data, etag, done, err := readServed(r.Context(), a, coords)
	if done != nil {
		defer done()
	}
	if !s.chunkReadOK(w, r, key, err) {
		return
	}
	h.Set("Content-Type", "application/octet-stream")
	var gzf gzipper
	if a.plain {
		gzf = gzipOf(data)
	}
	serveContent(w, r, data, etag, a.mod, gzf)
}

// serveShared answers a chunk served as stored, byte for byte: the
// response is written from the stored frame held in the shared chunk cache
// (ReadChunkRawShared), which every concurrent request for the chunk
// shares and the cache's budget bounds, so it takes none of the bound of
// the bytes responses make (MaxChunkBytes) and copies nothing. A chunk
// whose compressor the engine skipped is the exception: re-encoded as
// readServed does, under that bound.
func (s *Server) serveShared(w http.ResponseWriter, r *http.Request, a *array, coords []uint64, key string) {
	sc, err := a.ds.ReadChunkRawShared(r.Context(), coords)
	if !s.chunkReadOK(w, r, key, err) {
		return
	}
	if sc.FilterMask != 0 {
		// Not held while waiting for the bound: a request holding bytes
		// of the bound may be waiting for the cache's room.
		sc.Release()
		n := min(int64(2*a.chunkBytes), s.maxBytes)
		if err := s.bytes.Acquire(r.Context(), n); err != nil {
			return
		}
		defer s.bytes.Release(n)
		data, etag, done, err := readServed(r.Context(), a, coords)
		if done != nil {
			defer done()
		}
		if s.chunkReadOK(w, r, key, err) {
			w.Header().Set("Content-Type", "application/octet-stream")
			serveContent(w, r, data, etag, a.mod, nil)
		}
		return
	}
	defer sc.Release()
	w.Header()["Content-Type"] = hdrOctets
	serveContent(w, r, sc.Data, storedETag(sc.StoredChunk, ""), a.mod, nil)
}

// chunkReadOK answers a failed chunk read (and reports false), or reports
// true.
func (s *Server) chunkReadOK(w http.ResponseWriter, r *http.Request, key string, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, errNoChunk), errors.Is(err, engine.ErrNotFound),
		errors.Is(err, engine.ErrOutOfRange), errors.Is(err, engine.ErrDeleted):
		// Not stored, or outside the extent since a shrink, or a dataset
		// deleted since the view: the reader's fill value is right.
		http.Error(w, "chunk not stored", http.StatusNotFound)
	case r.Context().Err() != nil:
		// The client is gone.
	case errors.Is(err, engine.ErrStale):
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the file is being rewritten faster than it can be read; retry", http.StatusServiceUnavailable)
	default:
		s.readFailed(err)
		// The error names datasets and perhaps paths of the host:
		// logged, not sent.
		s.log.Error("zarr view: chunk read failed", "key", key, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
	return false
}

// notModified answers 304 to a request whose If-None-Match names the
// version of a chunk served as stored that the chunk index records now,
// without reading the chunk, and reports whether it did. Anything else
// (no stored chunk, a chunk re-encoded, a failed lookup, If-Match to
// evaluate first) is left to the read, which answers it as ServeContent
// does.
func notModified(w http.ResponseWriter, r *http.Request, a *array, coords []uint64) bool {
	inm := r.Header.Get("If-None-Match")
	if !a.copy || inm == "" || r.Header.Get("If-Match") != "" {
		return false
	}
	sc, err := a.ds.StatChunkRaw(r.Context(), coords)
	if err != nil || sc.FilterMask != 0 {
		return false
	}
	etag := storedETag(sc, a.wrap)
	h := w.Header()
	if a.plain {
		// The client may hold either representation; the stored bytes
		// being the same, so is their gzipped form.
		// Which one a client taking gzip gets depends on whether gzip
		// shrinks the chunk: only the read tells, unless it is the
		// gzipped one the client holds.
		h.Set("Vary", "Accept-Encoding")
		if a.chunkBytes >= gzipMin && wantsGzip(r) {
			etag = gzipETag(etag)
		}
	}
	if !etagListed(inm, etag) {
		return false
	}
	h.Set("ETag", etag)
	h.Del("Content-Type")
	w.WriteHeader(http.StatusNotModified)
	return true
}

// etagListed reports whether an If-None-Match value lists etag, compared
// weakly as RFC 9110 asks there, or is "*" (the chunk exists).
func etagListed(list, etag string) bool {
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// storedETag is the strong validator of a chunk served as stored or
// rewrapped: the bytes served are a fixed function of the stored ones
// (wrap names it), and the stored version is named by what the chunk
// index records of its frame: the checksum (over the bytes and, in format
// v5, the dataset and coordinates), the address and the size, which a
// rewrite changes. Nothing is hashed per request.
func storedETag(sc engine.StoredChunk, wrap string) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], sc.Sum)
	e := make([]byte, 0, 64)
	e = append(e, '"', 's')
	e = append(e, wrap...)
	e = append(e, '-')
	e = hex.AppendEncode(e, sum[:])
	e = append(e, '-')
	e = strconv.AppendUint(e, sc.Addr, 16)
	e = append(e, '-')
	e = strconv.AppendUint(e, sc.Size, 16)
	return string(append(e, '"'))
}

// chunkETag is a strong validator of bytes served that are not a fixed
// function of the stored ones (a chunk decoded, or re-encoded with the
// declared chain): their CRC-32C and CRC-32, both computed in hardware,
// and their length.
func chunkETag(b []byte) string {
	var sum [16]byte
	binary.BigEndian.PutUint32(sum[0:], crc32.Checksum(b, zarrmap.Castagnoli))
	binary.BigEndian.PutUint32(sum[4:], crc32.ChecksumIEEE(b))
	binary.BigEndian.PutUint64(sum[8:], uint64(len(b)))
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// serveContent answers with b through http.ServeContent (HEAD, ranges,
// If-None-Match, If-Range), gzipped when gz is given, the request allows
// it and gz says it helps (gzip.go). Validators by date are only trusted through
// the ETag: Last-Modified has one-second resolution and two commits can
// fall in one second, so If-Modified-Since and If-Unmodified-Since are
// ignored and a date in If-Range makes a range request get the whole
// content.
func serveContent(w http.ResponseWriter, r *http.Request, b []byte, etag string, mod stamp, gz gzipper) {
	r.Header.Del("If-Modified-Since")
	r.Header.Del("If-Unmodified-Since")
	if ir := r.Header.Get("If-Range"); ir != "" && !strings.HasPrefix(ir, `"`) && !strings.HasPrefix(ir, `W/"`) {
		r.Header.Del("If-Range")
		r.Header.Del("Range")
	}
	h := w.Header()
	if gz != nil && len(b) >= gzipMin {
		h.Set("Vary", "Accept-Encoding")
		if wantsGzip(r) {
			if z := gz(); z != nil {
				b, etag = z, gzipETag(etag)
				h.Set("Content-Encoding", "gzip")
				// ServeContent leaves Content-Length out of an encoded
				// body; this one is whole and known.
				h.Set("Content-Length", strconv.Itoa(len(b)))
			}
		}
	}
	// Header values set by canonical key, without Set's canonicalization;
	// the constant ones are shared (net/http copies a response's header
	// before writing it, and nothing appends to a value in place).
	h["Etag"] = []string{etag}
	if plainGet(w, r) {
		// What ServeContent answers to a request without conditions or
		// ranges, written in one Write: its io.Copy would flush the
		// header with the first 512 bytes on their own and copy the
		// rest through a buffer it allocates.
		h["Accept-Ranges"] = hdrBytes
		if mod.hdr != nil {
			h["Last-Modified"] = mod.hdr
		}
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(b)
		}
		return
	}
	http.ServeContent(w, r, "", mod.t, bytes.NewReader(b))
}

// Shared header values (len == cap, so that an append copies).
var (
	hdrBytes   = []string{"bytes"}
	hdrNoCache = []string{"no-cache"}
	hdrOctets  = []string{"application/octet-stream"}
	hdrJSON    = []string{"application/json"}
)

// stamp is a modification time with its Last-Modified value, formatted
// once for every response that sends it.
type stamp struct {
	t   time.Time
	hdr []string // nil when t is unknown (zero, or the Unix epoch)
}

func stampOf(t time.Time) stamp {
	if t.IsZero() || t.Equal(time.Unix(0, 0)) {
		return stamp{t: t}
	}
	return stamp{t: t, hdr: []string{t.UTC().Format(http.TimeFormat)}}
}

// plainGet reports whether r is a GET or HEAD that ServeContent would
// answer 200 with the whole content: no validator, no range, and a
// Content-Type already chosen (not sniffed).
func plainGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	for _, k := range []string{"Range", "If-Match", "If-None-Match", "If-Range", "If-Modified-Since", "If-Unmodified-Since"} {
		if _, ok := r.Header[k]; ok {
			return false
		}
	}
	_, typed := w.Header()["Content-Type"]
	return typed
}

// chunkOf parses key as a chunk key of one of v's arrays: v2 "path/i.j.k"
// ("0" for a rank-0 array), v3 "path/c/i/j/k" ("path/c"). The coordinates
// are decimal without sign or leading zeros, inside the chunk grid of
// the array's current extent.
func (s *Server) chunkOf(v *view, key string) (*array, []uint64, bool) {
	if s.version == 2 {
		i := strings.LastIndexByte(key, '/')
		if i < 0 {
			return nil, nil, false
		}
		a := v.arrays[key[:i]]
		if a == nil {
			return nil, nil, false
		}
		if a.scalar {
			return a, []uint64{0}, key[i+1:] == "0"
		}
		return coordsIn(a, key[i+1:], '.')
	}
	for i := 0; ; {
		j := strings.Index(key[i:], "/c")
		if j < 0 {
			return nil, nil, false
		}
		i += j
		rest := key[i+2:]
		if rest == "" || rest[0] == '/' {
			if a := v.arrays[key[:i]]; a != nil {
				if a.scalar {
					return a, []uint64{0}, rest == ""
				}
				if rest == "" {
					return nil, nil, false
				}
				return coordsIn(a, rest[1:], '/')
			}
		}
		i += 2
	}
}

// coordsIn parses the chunk coordinates of a in s, separated by sep.
// Their bound is the chunk grid of the dataset's extent when the chunk is
// read (a refresh may have grown it past the view's), which the read
// checks: ReadChunkRaw's ErrOutOfRange, readServed's check of a chunk
// read decoded; either answers 404. Taking the extent here too would
// cost every request the dataset's lock and a copy of its shape.
func coordsIn(a *array, s string, sep byte) (*array, []uint64, bool) {
	coords := make([]uint64, 0, len(a.chunk))
	for len(coords) < len(a.chunk) {
		p := s
		i := strings.IndexByte(s, sep)
		if i >= 0 {
			p, s = s[:i], s[i+1:]
		}
		c, ok := parseCoord(p)
		if !ok {
			return nil, nil, false
		}
		coords = append(coords, c)
		if i < 0 {
			return a, coords, len(coords) == len(a.chunk)
		}
	}
	return nil, nil, false
}

// parseCoord parses a chunk coordinate: decimal digits, no sign, no
// leading zero.
func parseCoord(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// readServed returns the bytes served for chunk coords of a: the stored
// bytes when its pipeline maps onto the declared codecs (read through the
// shared chunk cache with ReadChunkRawShared; done, when not nil, gives
// them back after the response), rewrapped or re-encoded when the
// declared chain says so, else the chunk decoded, read through the shared
// chunk cache like any read. errNoChunk when the chunk is not stored, or
// (when read decoded) holds only the fill value, which the reader reads
// the same.
func readServed(ctx context.Context, a *array, coords []uint64) (data []byte, etag string, done func(), err error) {
	if a.copy {
		sc, err := a.ds.ReadChunkRawShared(ctx, coords)
		if err != nil {
			return nil, "", nil, err
		}
		if sc.FilterMask == 0 {
			if a.wrap == "" {
				return sc.Data, storedETag(sc.StoredChunk, ""), sc.Release, nil
			}
			raw, err := zarrmap.Rewrap(a.wrap, sc.Data, a.chunkBytes)
			sc.Release()
			return raw, storedETag(sc.StoredChunk, a.wrap), nil, err
		}
		// A compressor the engine skipped for this chunk (it did not
		// shrink it), which the declared chain cannot say: encoded
		// with the chain.
		dec, err := a.ds.DecodeChunk(sc.Data, sc.FilterMask)
		sc.Release()
		if err != nil {
			return nil, "", nil, err
		}
		data, err = zarrmap.EncodeChain(a.chain, dec)
		return data, chunkETag(data), nil, err
	}
	// ReadChunk needs coords inside the extent (coordsIn does not bound
	// them); compared in chunks, since a hostile coordinate times the
	// chunk size overflows.
	shape, chunk := a.ds.Shape(), a.chunk
	if a.scalar {
		shape, chunk = []uint64{1}, []uint64{1} // its storage
	}
	for d, c := range coords {
		if d >= len(shape) || c >= (shape[d]+chunk[d]-1)/chunk[d] {
			return nil, "", nil, errNoChunk
		}
	}
	dec, err := zarrmap.ReadChunk(ctx, a.ds, shape, chunk, coords, a.chunkBytes)
	if err != nil {
		return nil, "", nil, err
	}
	if zarrmap.AllFill(dec, a.fill) {
		return nil, "", nil, errNoChunk
	}
	return dec, chunkETag(dec), nil, nil
}

// readFailed notes a failed read: one that finds the file damaged or cut
// short makes the next refresh check whether the path names another file
// now (Options.Path), as when a writer creates the file anew in place.
func (s *Server) readFailed(err error) {
	if s.path != "" && (errors.Is(err, engine.ErrCorrupt) || errors.Is(err, engine.ErrIO)) {
		s.suspect.Store(true)
	}
}
