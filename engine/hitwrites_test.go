package engine

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var poolType = reflect.TypeOf((*sync.Pool)(nil)).Elem()

// TestResidentReadWritesNoSharedMemory: a resident read (the single-chunk
// path: the serializer's fast hold, the cache hit, the copy) writes none
// of the structures every reader of the dataset reads — the File, the
// Dataset and its state, the serializer with its shards — only memory of
// its own P (the serializer's reader count, the cache's read slot, the
// P's scratch), so that readers on several cores never pass a written
// line between them. (The cache's side is TestHitWritesNoSharedMemory,
// which can keep the cache's replayer out. A store that leaves a value as
// it was does not show here.)
func TestResidentReadWritesNoSharedMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the snapshots read words that background goroutines change atomically")
	}
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	buf := make([]byte, rrBox*rrBox)
	read := func() {
		require.NoError(t, fx.ds.Read(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf))
	}
	for i := 0; i < 1000; i++ {
		read()
	}
	s := fx.ds.s
	type region struct {
		name   string
		t      reflect.Type
		p      unsafe.Pointer
		before []byte
	}
	bytesOf := func(r *region) []byte {
		return append([]byte(nil), unsafe.Slice((*byte)(r.p), r.t.Size())...)
	}
	var regions []*region
	add := func(name string, p any) {
		v := reflect.ValueOf(p)
		r := &region{name: name, t: v.Type().Elem(), p: v.UnsafePointer()}
		r.before = bytesOf(r)
		regions = append(regions, r)
	}
	add("File", fx.f)
	add("Dataset", fx.ds)
	add("dsState", s)
	add("Serializer", s.f.ser)
	for i := 0; i < 1000; i++ {
		read()
	}
	for _, r := range regions {
		now := bytesOf(r)
		for i := 0; i < r.t.NumField(); i++ {
			f := r.t.Field(i)
			if f.Type == poolType {
				continue // a GC moves a pool's items to its victim cache
			}
			lo, hi := f.Offset, f.Offset+f.Type.Size()
			assert.Equal(t, r.before[lo:hi], now[lo:hi], "a resident read wrote %s.%s", r.name, f.Name)
		}
	}
}
