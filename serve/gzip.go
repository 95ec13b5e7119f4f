package serve

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/scc-dev/scc/internal/zarrmap"
)

// Content-Encoding: gzip is used only where it helps: on bodies that are
// not compressed already (metadata documents, the web page's tree and
// assets, chunks whose declared chain has no compressor), of at least
// gzipMin bytes, that shrink by at least an eighth. A chunk the declared
// chain compresses is sent as it is: gzip would cost the server and the
// reader CPU time for no bytes. A range request gets the identity
// encoding, so that its offsets are those of the bytes the reader
// decodes; the gzipped representation has its own ETag (the identity
// one with "+gzip" inside the quotes), since its bytes differ.

// gzipMin is the smallest body worth gzipping: below it the header and
// the client's inflate cost more than the bytes saved.
const gzipMin = 1 << 10

// gzipLevel favours speed: the bodies are compressed per request.
const gzipLevel = gzip.BestSpeed

var gzipWriters = sync.Pool{New: func() any {
	z, _ := gzip.NewWriterLevel(nil, gzipLevel)
	return z
}}

// errNoGain stops a compression whose output has reached the most it may
// be.
var errNoGain = errors.New("gzip does not shrink the body enough")

// capWriter collects bytes up to its capacity and refuses more.
type capWriter struct{ b []byte }

func (c *capWriter) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > cap(c.b) {
		return 0, errNoGain
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// gzipBody returns b gzipped, or nil when b is too small or does not
// shrink by an eighth. The output never holds more than that: a body
// that does not compress costs no more memory than its bound.
func gzipBody(b []byte) []byte {
	if len(b) < gzipMin {
		return nil
	}
	out := &capWriter{b: make([]byte, 0, len(b)-len(b)/8)}
	z := gzipWriters.Get().(*gzip.Writer)
	z.Reset(out)
	_, err := z.Write(b)
	if err == nil {
		err = z.Close()
	}
	// A writer stopped by errNoGain holds that error until Reset, which
	// the next use does.
	gzipWriters.Put(z)
	if err != nil {
		return nil
	}
	return out.b
}

// gzipETag is the validator of the gzipped representation of the content
// whose validator is etag.
func gzipETag(etag string) string {
	if w, ok := strings.CutPrefix(etag, "W/"); ok {
		return "W/" + gzipETag(w)
	}
	return strings.TrimSuffix(etag, `"`) + `+gzip"`
}

// acceptsGzip reports whether r's Accept-Encoding admits gzip (or any
// coding) with a non-zero weight.
func acceptsGzip(r *http.Request) bool {
	star := false
	for _, v := range r.Header.Values("Accept-Encoding") {
		for t := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(t, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			ok := true
			for p := range strings.SplitSeq(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") {
					q, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
					ok = err == nil && q > 0
				}
			}
			if coding != "*" {
				// An explicit gzip entry decides, whatever "*" says.
				return ok
			}
			star = ok
		}
	}
	return star
}

// wantsGzip reports whether a response to r may be gzipped: the client
// takes gzip and asks for no range.
func wantsGzip(r *http.Request) bool {
	_, ranged := r.Header["Range"]
	return !ranged && acceptsGzip(r)
}

// compresses reports whether a chain compresses the chunk bytes it
// encodes, so that gzip would gain nothing on them.
func compresses(chain []zarrmap.Codec) bool {
	for _, c := range chain {
		switch c.ID {
		case "shuffle", "crc32c":
		default:
			return true
		}
	}
	return false
}

// A gzipper gives the gzipped form of one body, or nil when it is not
// to be gzipped.
type gzipper func() []byte

// gzipOf is the gzipper of b compressed per request.
func gzipOf(b []byte) gzipper {
	return func() []byte { return gzipBody(b) }
}

// gzipped returns the gzipped form of a metadata document, computed once
// per view: every reader opening the tree asks for the same documents.
func (b *blob) gzipped() []byte {
	b.gzOnce.Do(func() { b.gz = gzipBody(b.data) })
	return b.gz
}
