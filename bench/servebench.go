package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/zarr"
	"github.com/scc-dev/scc/serve"
)

// The serve scenario: HTTP clients reading random chunks of the public
// Zarr benchmark's array (uint16, zstd) from a served scc file (scctl
// serve's Zarr v2 view, chunks sent as stored), beside a Go
// http.FileServer and Python's http.server serving the Zarr export of the
// same file; and the time from a writer's Flush until a reader polling
// the served view sees the new frame.

// serveClients are the concurrent client counts measured.
var serveClients = []int{1, 8, 64}

func runServe(ctx context.Context, o Options, p *Peers, r *Report) error {
	c := ZarrBenchConfig{Side: o.size(256, 128, 32), Chunk: o.size(32, 32, 16)}
	if err := c.Validate(); err != nil {
		return err
	}
	dur := time.Duration(o.size(5000, 500, 100)) * time.Millisecond
	dir, err := os.MkdirTemp(o.Dir, "scc-bench-serve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "a.scc")
	o.logf("serve: writing the %d³ uint16 array (%d³ chunks, zstd 3)", c.Side, c.Chunk)
	if err := writeZarrBenchFile(ctx, path, c, []engine.Filter{engine.Zstd(3)}, ramp(c.Side)); err != nil {
		return err
	}
	// A cache budget and a response bound below the array's size, so that
	// the heap figure tells whether they bound the server's memory.
	const budget, respBytes = 16 << 20, 16 << 20
	f, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: budget}})
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	store := filepath.Join(dir, "a.zarr")
	if _, err := zarr.Export(ctx, f, store, zarr.Options{Version: 2, Strict: true}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	h, err := serve.New(ctx, f, serve.Options{MaxInFlight: 2 * slices.Max(serveClients), MaxChunkBytes: respBytes, Logger: quietLog()})
	if err != nil {
		return err
	}
	defer h.Close()
	sccURL, stop, err := listenHTTP(serve.NewHTTPServer("127.0.0.1:0", h))
	if err != nil {
		return err
	}
	defer stop()
	goURL, stopGo, err := listenHTTP(&http.Server{Handler: http.FileServer(http.Dir(store))})
	if err != nil {
		return err
	}
	defer stopGo()
	pyURL := ""
	if p.Python == "" {
		r.missing("python3 (http.server)")
	} else {
		u, stopPy, err := pythonHTTPServer(ctx, p.Python, store)
		if err != nil {
			r.missing("python3 -m http.server: " + err.Error())
		} else {
			defer stopPy()
			pyURL = u
		}
	}

	for _, n := range serveClients {
		var heap *heapPeak
		if n == slices.Max(serveClients) {
			heap = watchHeap()
		}
		sccRate, err := chunkRate(ctx, sccURL, c, n, dur)
		if heap != nil {
			base, peak := heap.stop()
			active := f.Cache().Stats().ActiveLimit
			o.logf("serve: %d clients: peak heap %.1f MiB (%.1f MiB before), cache budget %.0f MiB (active limit %.0f MiB), response bound %.0f MiB",
				n, inMiB(peak), inMiB(base), inMiB(budget), inMiB(active), inMiB(respBytes))
			r.add(Figure{Scenario: "serve", Key: fmt.Sprintf("heap-c%d", n),
				Metric: fmt.Sprintf("peak Go heap during the %d-client scc run (server and clients in one process)", n), Unit: "MiB", SCC: inMiB(peak),
				Note: fmt.Sprintf("%.1f MiB before the run; cache budget %.0f MiB (active limit %.0f MiB), chunk bytes held for responses at most %.0f MiB; array %.1f MiB",
					inMiB(base), inMiB(budget), inMiB(active), inMiB(respBytes), inMiB(c.arrayBytes())),
				Target: &Target{Kind: "max", Value: inMiB(base + max(active, budget) + respBytes)}})
		}
		if err != nil {
			return fmt.Errorf("scc, %d clients: %w", n, err)
		}
		goRate, err := chunkRate(ctx, goURL, c, n, dur)
		if err != nil {
			return fmt.Errorf("Go file server, %d clients: %w", n, err)
		}
		o.logf("serve: %d clients: scc %.0f chunks/s, Go http.FileServer %.0f", n, sccRate, goRate)
		fg := Figure{Scenario: "serve", Key: fmt.Sprintf("c%d-go", n), Metric: fmt.Sprintf("random chunks over HTTP, %d clients, beside Go's http.FileServer on the export", n),
			Unit: "chunks/s", HigherIsBetter: true, SCC: sccRate, Peer: "Go http.FileServer", PeerValue: &goRate}
		if n == 64 {
			fg.Target = &Target{Kind: "ratio", Value: 1}
		}
		r.add(fg)
		fp := Figure{Scenario: "serve", Key: fmt.Sprintf("c%d-py", n), Metric: fmt.Sprintf("random chunks over HTTP, %d clients, beside python3 -m http.server on the export", n),
			Unit: "chunks/s", HigherIsBetter: true, SCC: sccRate, Peer: "python3 http.server"}
		if pyURL != "" {
			// A peer that cannot keep up (http.server's listen backlog is
			// five: 64 clients meet connection resets) is a result about
			// the peer, not a failure of the scenario.
			if pyRate, err := chunkRate(ctx, pyURL, c, n, dur); err != nil {
				o.logf("serve: %d clients: python3 http.server failed: %v", n, err)
				fp.Note = fmt.Sprintf("python3 http.server failed at %d clients: %v", n, err)
			} else {
				o.logf("serve: %d clients: python3 http.server %.0f chunks/s", n, pyRate)
				fp.PeerValue = &pyRate
			}
		}
		if n == 64 {
			fp.Target = &Target{Kind: "ratio", Value: 3}
		}
		r.add(fp)
	}

	if err := zarrPythonRates(ctx, o, p, r, c, dir, sccURL, goURL, pyURL); err != nil {
		return err
	}

	lat, err := flushToVisible(ctx, dir, o.size(200, 30, 5))
	if err != nil {
		return fmt.Errorf("flush to visible: %w", err)
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	o.logf("serve: Flush to visible over %d frames: median %.1f ms, p99 %.1f ms", len(lat), q(0.5), q(0.99))
	note := fmt.Sprintf("%d frames, the server following the writer (File.Follow), the reader polling .zarray every ms", len(lat))
	r.add(Figure{Scenario: "serve", Key: "visible-p50", Metric: "Flush to visible in the served view, median", Unit: "ms", SCC: q(0.5), Note: note})
	r.add(Figure{Scenario: "serve", Key: "visible-p99", Metric: "Flush to visible in the served view, p99", Unit: "ms", SCC: q(0.99), Note: note,
		Target: &Target{Kind: "max", Value: 100}})
	return nil
}

// zarrPythonRates times zarr-python 2 reading random chunks through
// fsspec's HTTP filesystem from each server (those that run), one chunk
// at a time as a notebook does.
func zarrPythonRates(ctx context.Context, o Options, p *Peers, r *Report, c ZarrBenchConfig, dir, sccURL, goURL, pyURL string) error {
	python := zarrHTTPPython(ctx, p)
	if python == "" {
		r.missing("python3 with zarr, fsspec and aiohttp (zarr-python over HTTP; make interop-deps installs Debian's)")
		return nil
	}
	count := o.size(300, 60, 10)
	pp := *p
	pp.Python = python
	rate := func(url string) (float64, string, error) {
		var out struct {
			Seconds float64 `json:"seconds"`
			Chunks  int     `json:"chunks"`
			Zarr    string  `json:"zarr"`
			Fsspec  string  `json:"fsspec"`
		}
		err := runScript(ctx, &pp, dir, "servezarr_peer.py", &out, url, strconv.Itoa(c.Side), strconv.Itoa(c.Chunk), strconv.Itoa(count), "11")
		if err != nil || out.Seconds <= 0 {
			return 0, "", fmt.Errorf("zarr-python over HTTP (%s): %v", url, err)
		}
		return float64(out.Chunks) / out.Seconds, fmt.Sprintf("zarr-python %s, fsspec %s, %d random chunks one at a time", out.Zarr, out.Fsspec, out.Chunks), nil
	}
	sccRate, note, err := rate(sccURL)
	if err != nil {
		return err
	}
	goRate, _, err := rate(goURL)
	if err != nil {
		return err
	}
	o.logf("serve: zarr-python over HTTP: scc %.0f chunks/s, Go http.FileServer %.0f", sccRate, goRate)
	r.add(Figure{Scenario: "serve", Key: "zarrpy-go", Metric: "zarr-python reading random chunks over HTTP, beside Go's http.FileServer on the export",
		Unit: "chunks/s", HigherIsBetter: true, SCC: sccRate, Peer: "Go http.FileServer", PeerValue: &goRate, Note: note})
	fp := Figure{Scenario: "serve", Key: "zarrpy-py", Metric: "zarr-python reading random chunks over HTTP, beside python3 -m http.server on the export",
		Unit: "chunks/s", HigherIsBetter: true, SCC: sccRate, Peer: "python3 http.server", Note: note}
	if pyURL != "" {
		pyRate, _, err := rate(pyURL)
		if err != nil {
			return err
		}
		o.logf("serve: zarr-python over HTTP: python3 http.server %.0f chunks/s", pyRate)
		fp.PeerValue = &pyRate
	}
	r.add(fp)
	return nil
}

// zarrHTTPPython returns an interpreter that imports zarr, fsspec and
// aiohttp: the peers' one, else Debian's (where python3-fsspec and
// python3-aiohttp install); "" if none does or the peers are off.
func zarrHTTPPython(ctx context.Context, p *Peers) string {
	if p.Python == "" {
		return ""
	}
	for _, py := range []string{p.Python, "/usr/bin/python3"} {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := exec.CommandContext(cctx, py, "-c", "import zarr, fsspec, aiohttp, numpy").Run()
		cancel()
		if err == nil {
			return py
		}
	}
	return ""
}

// heapPeak samples the Go heap's object bytes until stopped.
type heapPeak struct {
	base, peak atomic.Uint64
	done       chan struct{}
	wg         sync.WaitGroup
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watchHeap starts sampling every few milliseconds, after a collection
// so that the figure before the run is what is live.
func watchHeap() *heapPeak {
	runtime.GC()
	h := &heapPeak{done: make(chan struct{})}
	h.base.Store(heapNow())
	h.peak.Store(h.base.Load())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-t.C:
				if v := heapNow(); v > h.peak.Load() {
					h.peak.Store(v)
				}
			}
		}
	}()
	return h
}

// stop returns the heap before the run and its peak during it.
func (h *heapPeak) stop() (base, peak int64) {
	close(h.done)
	h.wg.Wait()
	if v := heapNow(); v > h.peak.Load() {
		h.peak.Store(v)
	}
	return int64(h.base.Load()), int64(h.peak.Load())
}

func inMiB[T int | int64](n T) float64 { return float64(n) / mib }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// listenHTTP serves srv on a loopback port.
func listenHTTP(srv *http.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// pythonHTTPServer starts python -m http.server on dir and waits until it
// answers.
func pythonHTTPServer(ctx context.Context, python, dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.CommandContext(ctx, python, "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	for range 200 {
		if resp, err := http.Get(u + "/.zgroup"); err == nil {
			resp.Body.Close()
			return u, stop, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("did not start")
}

// chunkRate runs n clients, each with keep-alive, GETting random chunks
// of array "a" for dur, and returns the chunks read per second.
func chunkRate(ctx context.Context, base string, c ZarrBenchConfig, n int, dur time.Duration) (float64, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n, DisableCompression: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	g := c.grid()
	var (
		done  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(dur)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				key := fmt.Sprintf("%s/a/%d.%d.%d", base, rng.IntN(g), rng.IntN(g), rng.IntN(g))
				err := getChunk(ctx, cl, key)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

func getChunk(ctx context.Context, cl *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// flushToVisible appends frames to a file a server serves, each Flushed
// at a random moment, and returns for each the time from the Flush's
// return until a reader polling the served .zarray sees its extent.
func flushToVisible(ctx context.Context, dir string, frames int) ([]time.Duration, error) {
	path := filepath.Join(dir, "live.scc")
	wf, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	defer wf.Close(ctx)
	ds, err := wf.CreateDataset(ctx, "frames", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{0, 64, 64},
		MaxShape: []uint64{engine.Unlimited, 64, 64}, Chunk: []uint64{1, 64, 64}, Filters: []engine.Filter{engine.Zstd(1)}})
	if err != nil {
		return nil, err
	}
	if err := wf.Flush(ctx); err != nil {
		return nil, err
	}
	rf, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer rf.Close(ctx)
	h, err := serve.New(ctx, rf, serve.Options{Logger: quietLog()})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	base, stop, err := listenHTTP(serve.NewHTTPServer("127.0.0.1:0", h))
	if err != nil {
		return nil, err
	}
	defer stop()

	// The reader polls as a live client would, with a short pause, and
	// publishes each extent it sees with the time it saw it.
	type seen struct {
		n  uint64
		at time.Time
	}
	ch := make(chan seen, 1024)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rerr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		cl := &http.Client{}
		last := uint64(0)
		for rctx.Err() == nil {
			n, err := polledExtent(rctx, cl, base+"/frames/.zarray")
			if err != nil {
				if rctx.Err() == nil {
					rerr = err
				}
				return
			}
			if n != last {
				last = n
				ch <- seen{n, time.Now()}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	frame := make([]byte, 64*64*2)
	var lat []time.Duration
	for i := range frames {
		for j := range frame {
			frame[j] = byte(i + j)
		}
		if err := ds.SetExtent(ctx, []uint64{uint64(i + 1), 64, 64}); err != nil {
			return nil, err
		}
		if err := ds.Write(ctx, engine.Box([]uint64{uint64(i), 0, 0}, []uint64{1, 64, 64}), frame); err != nil {
			return nil, err
		}
		// A Flush at a random phase of the server's follow loop's backoff.
		time.Sleep(time.Duration(rng.IntN(int(serve.DefaultRefresh))))
		if err := wf.Flush(ctx); err != nil {
			return nil, err
		}
		flushed := time.Now()
		for {
			s, ok := <-ch
			if !ok {
				if rerr == nil {
					rerr = fmt.Errorf("the reader stopped")
				}
				return nil, rerr
			}
			if s.n >= uint64(i+1) {
				lat = append(lat, max(0, s.at.Sub(flushed)))
				break
			}
		}
	}
	cancel()
	wg.Wait()
	return lat, nil
}

func polledExtent(ctx context.Context, cl *http.Client, url string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var meta struct {
		Shape []uint64 `json:"shape"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || len(meta.Shape) == 0 {
		return 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return meta.Shape[0], nil
}
