package s3

import (
	"bytes"
	"errors"
	"testing"
)

func sampleManifest() *manifest {
	m := &manifest{gen: 7, pageSize: 4096, headSize: 16, size: 16 + 4096*2 + 5, epoch: 3,
		expiry: 123, nonce: 99, head: bytes.Repeat([]byte{0xab}, 16), pages: []uint64{0, 5, 1<<32 | 9}}
	m.owner[3] = 1
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	got, err := decodeManifest(m.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.encode(), m.encode()) {
		t.Fatalf("round trip changed the manifest: %+v vs %+v", got, m)
	}
}

func TestManifestRejectsDamage(t *testing.T) {
	b := sampleManifest().encode()
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, err := decodeManifest(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping byte %d: err %v, want ErrCorrupt", i, err)
		}
	}
	for n := 0; n < len(b); n++ {
		if _, err := decodeManifest(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: err %v, want ErrCorrupt", n, err)
		}
	}
}

// FuzzManifest: decoding hostile bytes never panics and never allocates
// beyond the input's size; whatever decodes re-encodes to the same bytes.
func FuzzManifest(f *testing.F) {
	f.Add(sampleManifest().encode())
	f.Add((&manifest{pageSize: 1 << 20, headSize: 8192, head: make([]byte, 8192)}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(m.encode(), b) {
			t.Fatal("decoded manifest does not re-encode to its bytes")
		}
	})
}
