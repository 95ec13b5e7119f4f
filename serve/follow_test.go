package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scc-dev/scc/engine"
)

// extentOf returns the first dimension of key's array as the server
// answers it now.
func extentOf(t *testing.T, s http.Handler, key string) uint64 {
	t.Helper()
	w := get(s, "GET", "/"+key+"/.zarray")
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	var m struct{ Shape []uint64 }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
	return m.Shape[0]
}

// TestFollowWriterInBackground: by default the server follows the writer
// from the background: each frame a writer Flushes reaches the view
// without any request asking for it (the view's generation moves on its
// own), requests do no refresh work, and Close stops the loop (no
// goroutine outlives the server).
func TestFollowWriterInBackground(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	path := filepath.Join(t.TempDir(), "live.scc")
	w, err := engine.Create(bg, path, nil)
	require.NoError(t, err)
	defer w.Close(bg)
	ds, err := w.CreateDataset(bg, "frames", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{0, 16},
		MaxShape: []uint64{engine.Unlimited, 16}, Chunk: []uint64{1, 16}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	require.NoError(t, w.Flush(bg))

	f, err := engine.Open(bg, path, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	s, err := New(bg, f, Options{Logger: quiet()})
	require.NoError(t, err)
	require.True(t, s.following)
	assert.Equal(t, uint64(0), extentOf(t, s, "frames"))

	viewGen := func() uint64 {
		v := s.acquire()
		defer v.release()
		return v.gen
	}
	for i := range 5 {
		require.NoError(t, ds.SetExtent(bg, []uint64{uint64(i + 1), 16}))
		require.NoError(t, ds.Write(bg, engine.Box([]uint64{uint64(i), 0}, []uint64{1, 16}), make([]byte, 16)))
		require.NoError(t, w.Flush(bg))
		gen := w.Generation()
		// No request is made until the view has moved.
		require.Eventually(t, func() bool { return viewGen() == gen }, 10*time.Second, time.Millisecond)
		assert.Equal(t, uint64(i+1), extentOf(t, s, "frames"))
		code := get(s, "GET", "/frames/"+itoa(uint64(i))+".0").Code
		assert.Equal(t, http.StatusOK, code)
	}

	// Requests do no refresh work: with the last refresh made to look an
	// hour old, they leave it as it is.
	s.refreshMu.Lock()
	s.epoch = s.epoch.Add(-time.Hour)
	last := s.last.Load()
	s.refreshMu.Unlock()
	for range 20 {
		get(s, "GET", "/frames/.zarray")
		get(s, "GET", "/frames/0.0")
	}
	assert.Equal(t, last, s.last.Load(), "a request refreshed")

	require.NoError(t, s.Close())
	require.NoError(t, f.Close(bg))
	require.NoError(t, w.Close(bg))
	goleak.VerifyNone(t, leaks)
}

// TestFollowFileReplacedRenamed: a server following its path serves a
// file created anew and renamed over it, without being told to refresh.
func TestFollowFileReplacedRenamed(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.scc")
	replacedFile(t, path, 1, "", 1)
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	s, err := New(bg, f, Options{Path: path, Logger: quiet()})
	require.NoError(t, err)

	b := replacedFile(t, filepath.Join(dir, "new.scc"), 50, "only_b", 1)
	require.NoError(t, os.Rename(filepath.Join(dir, "new.scc"), path))
	require.Eventually(t, func() bool {
		return get(s, "GET", "/only_b/.zarray").Code == http.StatusOK
	}, 10*time.Second, time.Millisecond)
	code, got := servedD(t, s)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, b, got)

	// The loop follows the new file: a dataset added to it appears.
	nf, err := engine.Open(bg, path, nil)
	require.NoError(t, err)
	_, err = nf.CreateDataset(bg, "later", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	require.NoError(t, nf.Flush(bg))
	require.Eventually(t, func() bool {
		return get(s, "GET", "/later/.zarray").Code == http.StatusOK
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, nf.Close(bg))

	require.NoError(t, s.Close())
	require.NoError(t, f.Close(bg))
	goleak.VerifyNone(t, leaks)
}
