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

// TestZlibWrap: a raw stream wrapped by wrapZlib is what Go's zlib reader
// (an independent implementation) accepts, and unwrapZlib gives back the
// raw stream of a zlib stream made elsewhere, checking size and Adler-32.
func TestZlibWrap(t *testing.T) {
	data := pattern(4, 5000, 1) // int64 elements: 40000 bytes
	z := stdZlib(t, data, 6)
	stream, err := unwrapZlib(z, len(data))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stream, z[2:len(z)-4]) {
		t.Fatal("unwrap did not return the inner stream")
	}
	w, err := wrapZlib(stream, len(data))
	if err != nil {
		t.Fatal(err)
	}
	r, err := zlib.NewReader(bytes.NewReader(w))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("wrapped stream does not read back: %v", err)
	}
	bad := [][]byte{
		nil, z[:5],
		append([]byte{0x78, 0x02}, z[2:]...),                        // FCHECK wrong
		append([]byte{0x79, 0x9c}, z[2:]...),                        // CM 9
		append(append([]byte(nil), z[:len(z)-1]...), z[len(z)-1]^1), // Adler-32 wrong
	}
	for i, b := range bad {
		if _, err := unwrapZlib(b, len(data)); err == nil {
			t.Errorf("bad stream %d accepted", i)
		}
	}
	if _, err := unwrapZlib(z, len(data)-1); err == nil {
		t.Error("a stream longer than the chunk was accepted")
	}
	if _, err := unwrapZlib(z, len(data)+1); err == nil {
		t.Error("a stream shorter than the chunk was accepted")
	}
	if _, err := wrapZlib([]byte("garbage"), 10); err == nil {
		t.Error("wrapZlib accepted garbage")
	}
}

// FuzzUnwrapZlib: unwrapZlib reads chunk bytes from HDF5 files, i.e. from
// disk: whatever the bytes, it returns an error or a stream that inflates
// to exactly n bytes with the Adler-32 the input carries; it never panics
// and never allocates beyond the chunk size it was given.
func FuzzUnwrapZlib(f *testing.F) {
	data := pattern(2, 300, 2)
	for _, lv := range []int{0, 1, 9} {
		f.Add(stdZlib(f, data, lv), uint16(len(data)))
	}
	f.Add([]byte{0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}, uint16(0))
	f.Fuzz(func(t *testing.T, z []byte, n uint16) {
		stream, err := unwrapZlib(z, int(n))
		if err != nil {
			return
		}
		r, err := zlib.NewReader(bytes.NewReader(append(append([]byte{0x78, 0x01}, stream...), z[len(z)-4:]...)))
		if err != nil {
			t.Fatalf("accepted stream has no zlib header: %v", err)
		}
		var out bytes.Buffer
		if _, err := out.ReadFrom(r); err != nil || out.Len() != int(n) {
			t.Fatalf("accepted stream does not inflate to %d bytes: %d, %v", n, out.Len(), err)
		}
	})
}
