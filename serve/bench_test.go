package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/interop/zarr"
)

// BenchmarkChunks drives the handler over loopback HTTP with 1, 8 and 64
// keep-alive clients GETting random chunks of a zstd uint16 array, the
// shape of scctl bench serve's scenario.
func BenchmarkChunks(b *testing.B) {
	const side, chunk = 128, 32
	path := filepath.Join(b.TempDir(), "b.scc")
	f := testfile.Create(b, path, nil)
	ds, err := f.CreateDataset(context.Background(), "a", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{side, side, side},
		Chunk: []uint64{chunk, chunk, chunk}, Filters: []engine.Filter{engine.Zstd(3)}})
	require.NoError(b, err)
	buf := make([]byte, 2*side*side*side)
	// Every row a ramp of uint16 from a start that varies with the row,
	// as in the public Zarr benchmark's array.
	for i0 := range side {
		for i1 := range side {
			for i2 := range side {
				v := (i2 + i1*i1/32 + i0*i0*i0) % 65536
				k := 2 * ((i0*side+i1)*side + i2)
				buf[k], buf[k+1] = byte(v), byte(v>>8)
			}
		}
	}
	require.NoError(b, ds.Write(bg, engine.Box([]uint64{0, 0, 0}, []uint64{side, side, side}), buf))
	require.NoError(b, f.Flush(bg))
	rf, s, _ := open(b, path, Options{MaxInFlight: 128, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// The baseline: Go's file server on the file's Zarr export.
	store := filepath.Join(b.TempDir(), "b.zarr")
	_, err = zarr.Export(bg, rf, store, zarr.Options{Version: 2, Strict: true})
	require.NoError(b, err)
	listen := func(h http.Handler) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		srv := NewHTTPServer("", h)
		go srv.Serve(ln)
		b.Cleanup(func() { srv.Close() })
		return "http://" + ln.Addr().String()
	}
	bases := map[string]string{"scc": listen(s), "fileserver": listen(http.FileServer(http.Dir(store)))}
	const g = side / chunk
	for _, srv := range []string{"scc", "fileserver"} {
		for _, n := range []int{1, 8, 64} {
			base := bases[srv]
			b.Run(fmt.Sprintf("%s/clients=%d", srv, n), func(b *testing.B) {
				tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n, DisableCompression: true}
				defer tr.CloseIdleConnections()
				cl := &http.Client{Transport: tr}
				var seed atomic.Uint64
				b.SetParallelism((n + 1) / 2)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(seed.Add(1), 7))
					for pb.Next() {
						resp, err := cl.Get(fmt.Sprintf("%s/a/%d.%d.%d", base, rng.IntN(g), rng.IntN(g), rng.IntN(g)))
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("status %s", resp.Status)
							return
						}
					}
				})
			})
		}
	}
}
