package format

import (
	"bytes"
	"errors"
	"testing"
)

// TestCatalogParts: the Attrs part round-trips, an absent part encodes as
// the plain catalog, and v1 catalogs (no parts allowed) and bad parts are
// refused as corruption.
func TestCatalogParts(t *testing.T) {
	cat := sampleCatalog()
	attrs := []byte{1, 2, 3, 4, 5}
	b := EncodeCatalogParts(cat, CatalogParts{Attrs: attrs})
	got, parts, err := DecodeCatalogParts(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cat) || !bytes.Equal(parts.Attrs, attrs) {
		t.Fatalf("round trip: %d entries, attrs %x", len(got), parts.Attrs)
	}
	if !bytes.Equal(EncodeCatalogParts(cat, CatalogParts{}), EncodeCatalog(cat)) {
		t.Fatal("an absent part changed the encoding")
	}
	// The same bytes labelled version 1 are corrupt: v1 has no parts.
	v1 := bytes.Clone(b)
	v1[4] = 1
	v1 = sealFrame(v1[:len(v1)-4])
	if _, _, err := DecodeCatalogParts(v1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v1 catalog with a part: %v", err)
	}
	// An unknown tag is corrupt.
	bad := EncodeCatalogParts(cat, CatalogParts{})
	bad = bad[:len(bad)-4]
	bad = appendParts(bad, []part{{tag: 2, data: []byte{1}}})
	if _, _, err := DecodeCatalogParts(sealFrame(bad)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown tag: %v", err)
	}
	if err := ValidateCatalogParts(CatalogParts{Attrs: make([]byte, MaxPartBytes+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized part: %v", err)
	}
}
