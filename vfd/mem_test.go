package vfd

import (
	"bytes"
	"errors"
	"testing"
)

func TestMemBytesIsACopy(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, []byte("hello"), 0)
	b := m.Bytes()
	b[0] = 'j'
	if got := m.Bytes(); string(got) != "hello" {
		t.Fatalf("changing a Bytes snapshot changed the file: %q", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.Bytes(); string(got) != "hello" {
		t.Fatalf("Bytes after Close = %q", got)
	}
}

func TestNewMemFromCopies(t *testing.T) {
	src := []byte("abcdef")
	m := NewMemFrom(src)
	src[0] = 'z'
	if got := contents(t, m); string(got) != "abcdef" {
		t.Fatalf("NewMemFrom shares the caller's slice: %q", got)
	}
	mustWrite(t, m, []byte("XY"), 5)
	if string(src) != "zbcdef" {
		t.Fatalf("a write to the Mem changed the source slice: %q", src)
	}
}

func TestMemSizeLimit(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, []byte{1, 2, 3}, 0)
	if _, err := m.WriteAt([]byte{1}, MaxMemSize); !errors.Is(err, ErrInvalid) {
		t.Errorf("WriteAt past MaxMemSize: %v", err)
	}
	if err := m.Truncate(MaxMemSize + 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("Truncate past MaxMemSize: %v", err)
	}
	if err := m.WriteV([]Extent{{Off: 10, Buf: []byte{7}}, {Off: MaxMemSize, Buf: []byte{1}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("WriteV past MaxMemSize: %v", err)
	}
	if got := m.Bytes(); !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("refused writes changed the file: %v", got)
	}
}
