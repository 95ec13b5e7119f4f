package filter

import (
	"bytes"
	"errors"
	"runtime/debug"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zlib"
)

// TestInflaterLinked reports the DEFLATE decoder this build links and holds
// the build constraint to the build's own record of CGO_ENABLED: every cgo
// build (the default wherever a C compiler is found) inflates with the
// bundled libdeflate, which needs no system package; CGO_ENABLED=0 builds
// inflate with pure Go. Whichever is linked decodes valid streams exactly
// and fails corrupt or oversized ones with ErrCorrupt inside the bound.
func TestInflaterLinked(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	cgo := ""
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" {
			cgo = s.Value
		}
	}
	want := map[string]string{"1": "libdeflate", "0": "klauspost/compress"}[cgo]
	t.Logf("CGO_ENABLED=%s: inflater %s", cgo, Inflater)
	if Inflater != want {
		t.Fatalf("CGO_ENABLED=%q links inflater %q, want %q", cgo, Inflater, want)
	}

	plain := make([]byte, 100<<10)
	for i := range plain {
		plain[i] = byte(i>>6) ^ byte(i*7>>11)
	}
	var rb, zb bytes.Buffer
	fw, _ := flate.NewWriter(&rb, 6)
	zw, _ := zlib.NewWriterLevel(&zb, 6)
	for _, w := range []interface {
		Write([]byte) (int, error)
		Close() error
	}{fw, zw} {
		if _, err := w.Write(plain); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		src  []byte
		dec  func(dst, src []byte) ([]byte, error)
	}{{"deflate", rb.Bytes(), inflateRaw}, {"zlib", zb.Bytes(), inflateZlib}} {
		got, err := c.dec(make([]byte, 0, len(plain)), c.src)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%s: valid stream: %d bytes, %v", c.name, len(got), err)
		}
		bad := bytes.Clone(c.src)
		bad[len(bad)/2] ^= 0xff
		for what, s := range map[string][]byte{
			"truncated": c.src[:len(c.src)-3],
			"trailing":  append(bytes.Clone(c.src), 0),
			"garbage":   bytes.Repeat([]byte{0xff}, 64),
		} {
			if _, err := c.dec(make([]byte, 0, len(plain)), s); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s %s: %v, want ErrCorrupt", c.name, what, err)
			}
		}
		// A flipped byte: an error wraps ErrCorrupt, a success stays in the
		// bound (the chunk's CRC32C, checked before inflating, is what
		// catches corruption libdeflate's checks let through).
		if out, err := c.dec(make([]byte, 0, len(plain)), bad); err != nil && !errors.Is(err, ErrCorrupt) || len(out) > len(plain) {
			t.Fatalf("%s flipped: %d bytes, %v", c.name, len(out), err)
		}
		// A stream that decodes past the chunk's size fails, and nothing is
		// written past the bound.
		dst := make([]byte, len(plain)/2, len(plain)/2+16)
		sentinel := dst[len(dst):cap(dst)]
		for i := range sentinel {
			sentinel[i] = 0xa5
		}
		if _, err := c.dec(dst[:0:len(plain)/2], c.src); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s over the bound: %v, want ErrCorrupt", c.name, err)
		}
		if !bytes.Equal(sentinel, bytes.Repeat([]byte{0xa5}, 16)) {
			t.Fatalf("%s wrote past its bound", c.name)
		}
	}
}
