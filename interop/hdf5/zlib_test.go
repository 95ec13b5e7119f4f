package hdf5

import (
	"bytes"
	"compress/zlib"
	"testing"
)

func stdZlib(t testing.TB, data []byte, level int) []byte {
	var b bytes.Buffer
	w, err := zlib.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// TestZlibWrap: a raw stream (scc's Deflate image) wrapped by wrapZlib is
// what Go's zlib reader (an independent implementation) accepts, and is
// the zlib stream another implementation made of the same bytes, header
// aside; streams that do not inflate to exactly the chunk are refused.
func TestZlibWrap(t *testing.T) {
	data := pattern(4, 5000, 1) // int64 elements: 40000 bytes
	z := stdZlib(t, data, 6)
	stream := z[2 : len(z)-4]
	w, err := wrapZlib(stream, len(data))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w[2:], z[2:]) {
		t.Fatal("wrapped stream differs from the reference beyond the header")
	}
	r, err := zlib.NewReader(bytes.NewReader(w))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("wrapped stream does not read back: %v", err)
	}
	for name, tc := range map[string]struct {
		stream []byte
		n      int
	}{
		"garbage":   {[]byte("garbage"), 10},
		"too long":  {stream, len(data) - 1},
		"too short": {stream, len(data) + 1},
		"truncated": {stream[:len(stream)/2], len(data)},
		"trailing":  {append(append([]byte(nil), stream...), 0), len(data)},
	} {
		if _, err := wrapZlib(tc.stream, tc.n); err == nil {
			t.Errorf("%s: wrapZlib accepted it", name)
		}
	}
}

// FuzzWrapZlib: wrapZlib inflates scc chunk images read from disk (raw
// DEFLATE streams) to compute the Adler-32: whatever the bytes, it returns
// an error or a zlib stream that inflates to exactly n bytes with a
// matching checksum; it never panics and never allocates beyond the chunk
// size it was given.
func FuzzWrapZlib(f *testing.F) {
	data := pattern(2, 300, 2)
	for _, lv := range []int{0, 1, 9} {
		z := stdZlib(f, data, lv)
		f.Add(z[2:len(z)-4], uint16(len(data)))
	}
	f.Add([]byte{0x03, 0x00}, uint16(0))
	f.Fuzz(func(t *testing.T, stream []byte, n uint16) {
		w, err := wrapZlib(stream, int(n))
		if err != nil {
			return
		}
		r, err := zlib.NewReader(bytes.NewReader(w))
		if err != nil {
			t.Fatalf("wrapped stream has no zlib header: %v", err)
		}
		var out bytes.Buffer
		if _, err := out.ReadFrom(r); err != nil || out.Len() != int(n) {
			t.Fatalf("wrapped stream does not inflate to %d bytes: %d, %v", n, out.Len(), err)
		}
	})
}
