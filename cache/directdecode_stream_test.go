package cache

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scc-dev/scc/cache/layout"
)

// holdLayout is an encLayout whose chunks a read of part of them decodes
// transiently (ScatterDecoder), each holding what holds says for its
// stored address (holdDefault otherwise) (ScatterHolder).
type holdLayout struct {
	*encLayout
	holds    map[int64]int64
	scatters atomic.Int64
}

const holdDefault = 100

var (
	_ layout.ScatterDecoder = (*holdLayout)(nil)
	_ layout.ScatterHolder  = (*holdLayout)(nil)
)

func (l *holdLayout) DecodeScatter(c layout.Coord, loc layout.Location, image []byte, pieces []layout.Piece, _ bool, _ uint32) (bool, error) {
	if l.hookOn.Load() && l.decHook != nil {
		l.decHook(c)
	}
	ch, err := l.Decode(c, loc, image)
	if err != nil {
		return true, err
	}
	for _, p := range pieces {
		if err := l.Scatter(ch, p); err != nil {
			return true, err
		}
	}
	l.scatters.Add(1)
	return true, nil
}

func (l *holdLayout) ScatterHold(loc layout.Location, _ []byte, _ []layout.Piece) (int64, bool) {
	if h, ok := l.holds[loc.Addr]; ok {
		return h, true
	}
	return holdDefault, true
}

// streamEnv writes n chunks of 256 KiB with one cache and returns a
// fresh cache over the same file, to which they were never read or
// written, whose reads of them decode directly (AdmitOnReread: not read
// before), with split reads off so that every image is one extent of a
// ReadV.
func streamEnv(t *testing.T, n int) (*env, *Dataset, *holdLayout, [][]byte) {
	w := newEnv(t, Config{})
	l := &holdLayout{encLayout: &encLayout{fakeLayout: newFakeLayout(&w.alloc, 512, 512)}, holds: map[int64]int64{}}
	dw, err := w.f.RegisterDataset(1, l, DatasetOptions{MinBytes: -1})
	require.NoError(t, err)
	var want [][]byte
	for k := range n {
		b := pattern(512*512, byte(k))
		want = append(want, b)
		must(t, w.c.Write(bg, []Request{fullReq(dw, l.fakeLayout, b, uint64(k), 0)}))
	}
	must(t, w.f.Flush(bg))
	must(t, w.f.Unregister(bg))
	must(t, w.c.Close())
	e := &env{t: t, c: newTestCache(t, Config{QuiescentBytes: 64 << 20, BypassBytes: 32 << 20, AdmitOnReread: true, Workers: 2, SplitReadBytes: -1}), drv: w.drv}
	e.f, err = e.c.RegisterFile(e.drv)
	require.NoError(t, err)
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{MinBytes: -1})
	require.NoError(t, err)
	return e, d, l, want
}

// A one-call read of many chunks reads their images while it decodes
// them: when any chunk starts decoding, at most 2×(Workers+1) images (the
// ones waiting and the ones decoding) plus two batches (four images each)
// have been read and not decoded. Reading every image first (32 of 32 at
// the first decode) held them all at once, each in fresh memory. Both ways: into the
// caller's buffer (DirectDecoder) and transient (part of each chunk).
func TestDirectDecodeReadsWhileDecoding(t *testing.T) {
	const n = 32
	for _, whole := range []bool{true, false} {
		e, d, l, want := streamEnv(t, n)
		var decoded, worst atomic.Int64
		l.decHook = func(layout.Coord) {
			out := e.drv.readExts.Load() - decoded.Add(1) + 1
			for {
				w := worst.Load()
				if out <= w || worst.CompareAndSwap(w, out) {
					break
				}
			}
		}
		l.hookOn.Store(true)
		before := e.c.Stats()
		bufs := make([][]byte, n)
		var reqs []Request
		for k := range n {
			if whole {
				bufs[k] = make([]byte, 512*512)
				reqs = append(reqs, fullReq(d, l.fakeLayout, bufs[k], uint64(k), 0))
			} else {
				bufs[k] = make([]byte, 1000)
				reqs = append(reqs, partReq(d, 777, bufs[k], uint64(k), 0))
			}
		}
		must(t, e.c.Read(bg, reqs))
		st := e.c.Stats().Sub(before)
		for k := range n {
			if whole {
				assert.True(t, bytes.Equal(bufs[k], want[k]), "chunk %d", k)
			} else {
				assert.True(t, bytes.Equal(bufs[k], want[k][777:1777]), "chunk %d", k)
			}
		}
		assert.EqualValues(t, n, decoded.Load(), "whole %v: decodes", whole)
		assert.LessOrEqual(t, worst.Load(), int64(2*(2+1)+2*4), "whole %v: images read and not decoded at a decode's start", whole)
		assert.Zero(t, st.Chunks, "whole %v: nothing made resident", whole)
		if whole {
			assert.EqualValues(t, n, st.DirectDecodes)
		} else {
			assert.EqualValues(t, n, l.scatters.Load())
		}
	}
}

// A chunk read after the stream has started that holds more than each
// decoder reserved (the first batch's largest hold) is decoded after the
// stream, under a reservation of its own, and is read right.
func TestDirectDecodeDefersLargerHolds(t *testing.T) {
	const n = 8
	e, d, l, want := streamEnv(t, n)
	for _, k := range []uint64{3, 6} {
		loc, ok := l.stored([]uint64{k, 0})
		require.True(t, ok)
		l.holds[loc.Addr] = 4 * holdDefault
	}
	before, res := deferredDecodes.Load(), e.c.Stats().ResidentBytes
	bufs := make([][]byte, n)
	var reqs []Request
	for k := range n {
		bufs[k] = make([]byte, 300)
		reqs = append(reqs, partReq(d, 5, bufs[k], uint64(k), 0))
	}
	must(t, e.c.Read(bg, reqs))
	assert.EqualValues(t, 2, deferredDecodes.Load()-before, "deferred decodes")
	for k := range n {
		assert.True(t, bytes.Equal(bufs[k], want[k][5:305]), "chunk %d", k)
	}
	assert.EqualValues(t, n, l.scatters.Load())
	assert.Equal(t, res, e.c.Stats().ResidentBytes, "reservations given back")
}

// A read error in the middle of the stream, a decode error, and a context
// cancelled while the stream runs each fail the read with their cause and
// leave no goroutine behind; the next read is served. (Each on a fresh
// cache: a chunk a read missed once is no longer decoded directly.)
func TestDirectDecodeStreamErrors(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 32
	read := func(ctx context.Context, e *env, d *Dataset) ([][]byte, error) {
		bufs := make([][]byte, n)
		var reqs []Request
		for k := range n {
			bufs[k] = make([]byte, 64)
			reqs = append(reqs, partReq(d, 9, bufs[k], uint64(k), 0))
		}
		return bufs, e.c.Read(ctx, reqs)
	}
	for _, tc := range []struct {
		name string
		arm  func(e *env, l *holdLayout, cancel func())
		want error
	}{
		{"read error at the second batch", func(e *env, _ *holdLayout, _ func()) { e.drv.failReadAt.Store(e.drv.readVs.Load() + 2) }, errDisk},
		{"decode error", func(_ *env, l *holdLayout, _ func()) { l.failDecode.Store(true) }, errFake},
		{"cancelled at the first decode", func(_ *env, l *holdLayout, cancel func()) {
			l.decHook = func(layout.Coord) { cancel() }
			l.hookOn.Store(true)
		}, context.Canceled},
	} {
		e, d, l, want := streamEnv(t, n)
		ctx, cancel := context.WithCancel(bg)
		tc.arm(e, l, cancel)
		_, err := read(ctx, e, d)
		cancel()
		assert.ErrorIs(t, err, tc.want, tc.name)
		e.drv.failReadAt.Store(0)
		l.failDecode.Store(false)
		l.hookOn.Store(false)
		bufs, err := read(bg, e, d)
		require.NoError(t, err, tc.name)
		for k := range n {
			assert.True(t, bytes.Equal(bufs[k], want[k][9:73]), "%s: chunk %d", tc.name, k)
		}
		must(t, e.f.Unregister(bg))
		must(t, e.c.Close())
	}
}
