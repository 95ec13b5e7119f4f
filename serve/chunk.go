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
	h.Set("Cache-Control", "no-cache")
	if key == "" {
		s.serveWeb(w, r, v, "", true)
		return
	}
	if rest, ok := strings.CutPrefix(key, WebPrefix[1:]); ok {
		s.serveWeb(w, r, v, rest, false)
		return
	}
	if b := v.blobs[key]; b != nil {
		h.Set("Content-Type", "application/json")
		serveContent(w, r, b.data, b.etag, b.mod)
		return
	}
	a, coords, ok := s.chunkOf(v, key)
	if !ok {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	// The chunk is held whole until it is sent: its bytes count against
	// the bound of what all responses hold.
	n := min(int64(a.chunkBytes), s.maxBytes)
	if err := s.bytes.Acquire(r.Context(), n); err != nil {
		return // the client is gone
	}
	defer s.bytes.Release(n)
	data, err := readServed(r.Context(), a, coords)
	switch {
	case err == nil:
	case errors.Is(err, errNoChunk), errors.Is(err, engine.ErrNotFound),
		errors.Is(err, engine.ErrOutOfRange), errors.Is(err, engine.ErrDeleted):
		// Not stored, or outside the extent since a shrink, or a dataset
		// deleted since the view: the reader's fill value is right.
		http.Error(w, "chunk not stored", http.StatusNotFound)
		return
	case r.Context().Err() != nil:
		return // the client is gone
	case errors.Is(err, engine.ErrStale):
		h.Set("Retry-After", "1")
		http.Error(w, "the file is being rewritten faster than it can be read; retry", http.StatusServiceUnavailable)
		return
	default:
		s.readFailed(err)
		// The error names datasets and perhaps paths of the host:
		// logged, not sent.
		s.log.Error("zarr view: chunk read failed", "key", key, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", "application/octet-stream")
	serveContent(w, r, data, chunkETag(data), a.mod)
}

// chunkETag is a strong validator of a chunk's bytes: their CRC-32C, the
// checksum scc frames a stored chunk with (for a chunk served as stored,
// its first half is that checksum), their CRC-32, both computed in
// hardware, and their length. The engine's raw chunk read verifies the
// stored checksum but does not return it, so it is computed again over
// the bytes served (which for a decoded or rewrapped chunk differ from
// the stored ones anyway).
func chunkETag(b []byte) string {
	var sum [16]byte
	binary.BigEndian.PutUint32(sum[0:], crc32.Checksum(b, zarrmap.Castagnoli))
	binary.BigEndian.PutUint32(sum[4:], crc32.ChecksumIEEE(b))
	binary.BigEndian.PutUint64(sum[8:], uint64(len(b)))
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// serveContent answers with b through http.ServeContent (HEAD, ranges,
// If-None-Match, If-Range). Validators by date are only trusted through
// the ETag: Last-Modified has one-second resolution and two commits can
// fall in one second, so If-Modified-Since and If-Unmodified-Since are
// ignored and a date in If-Range makes a range request get the whole
// content.
func serveContent(w http.ResponseWriter, r *http.Request, b []byte, etag string, mod time.Time) {
	w.Header().Set("ETag", etag)
	r.Header.Del("If-Modified-Since")
	r.Header.Del("If-Unmodified-Since")
	if ir := r.Header.Get("If-Range"); ir != "" && !strings.HasPrefix(ir, `"`) && !strings.HasPrefix(ir, `W/"`) {
		r.Header.Del("If-Range")
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, "", mod, bytes.NewReader(b))
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
		parts := strings.Split(key[i+1:], ".")
		if len(a.shape) == 0 {
			return a, []uint64{}, key[i+1:] == "0"
		}
		return coordsIn(a, parts)
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
				if len(a.shape) == 0 {
					return a, []uint64{}, rest == ""
				}
				if rest == "" {
					return nil, nil, false
				}
				return coordsIn(a, strings.Split(rest[1:], "/"))
			}
		}
		i += 2
	}
}

// coordsIn parses the chunk coordinates parts of a, bounded by the chunk
// grid of the dataset's current extent (which a refresh may have grown
// past the view's).
func coordsIn(a *array, parts []string) (*array, []uint64, bool) {
	shape := a.ds.Shape()
	if len(parts) != len(a.chunk) || len(shape) != len(a.chunk) {
		return nil, nil, false
	}
	coords := make([]uint64, len(parts))
	for d, p := range parts {
		c, ok := parseCoord(p)
		if !ok || c >= (shape[d]+a.chunk[d]-1)/a.chunk[d] {
			return nil, nil, false
		}
		coords[d] = c
	}
	return a, coords, true
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
// bytes when its pipeline maps onto the declared codecs (ReadChunkRaw),
// else the chunk decoded, read through the shared chunk cache like any
// read. errNoChunk when the chunk is not stored, or (when read decoded)
// holds only the fill value, which the reader reads the same.
func readServed(ctx context.Context, a *array, coords []uint64) ([]byte, error) {
	if a.copy {
		raw, mask, err := a.ds.ReadChunkRaw(ctx, coords)
		if err != nil {
			return nil, err
		}
		if mask == 0 {
			if a.wrap != "" {
				return zarrmap.Rewrap(a.wrap, raw, a.chunkBytes)
			}
			return raw, nil
		}
		// A compressor the engine skipped for this chunk (it did not
		// shrink it), which the declared chain cannot say: encoded
		// with the chain.
		dec, err := a.ds.DecodeChunk(raw, mask)
		if err != nil {
			return nil, err
		}
		return zarrmap.EncodeChain(a.chain, dec)
	}
	// The extent may have changed since coordsIn checked it: ReadChunk
	// needs coords inside it.
	shape := a.ds.Shape()
	for d, c := range coords {
		if c*a.chunk[d] >= shape[d] {
			return nil, errNoChunk
		}
	}
	dec, err := zarrmap.ReadChunk(ctx, a.ds, shape, a.chunk, coords, a.chunkBytes)
	if err != nil {
		return nil, err
	}
	if zarrmap.AllFill(dec, a.fill) {
		return nil, errNoChunk
	}
	return dec, nil
}

// readFailed notes a failed read: one that finds the file damaged or cut
// short makes the next refresh check whether the path names another file
// now (Options.Path), as when a writer creates the file anew in place.
func (s *Server) readFailed(err error) {
	if s.path != "" && (errors.Is(err, engine.ErrCorrupt) || errors.Is(err, engine.ErrIO)) {
		s.suspect.Store(true)
	}
}
