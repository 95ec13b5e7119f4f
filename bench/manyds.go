package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/scc-dev/scc/engine"
)

// ManyDatasetsResult is the Go heap cost of holding open datasets.
type ManyDatasetsResult struct {
	Datasets   int
	HeapDelta  int64   // live heap after opening all minus before, after GC
	PerDataset float64 // HeapDelta / Datasets
}

// manySpec is a small appendable dataset with one stored chunk: the kind a
// user with thousands of time series holds open.
func manySpec() engine.DatasetSpec {
	return engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{16, 64}, MaxShape: []uint64{engine.Unlimited, 64},
		Chunk: []uint64{16, 64},
	}
}

func manyName(i int) string { return fmt.Sprintf("series%06d", i) }

// ManyDatasetsFile creates n datasets of manySpec with one chunk each.
func ManyDatasetsFile(ctx context.Context, path string, n int) error {
	f, err := engine.Create(ctx, path, nil)
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	buf := make([]byte, 16*64*2)
	for i := 0; i < n; i++ {
		ds, err := f.CreateDataset(ctx, manyName(i), manySpec())
		if err != nil {
			return err
		}
		buf[0] = byte(i)
		if err := ds.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{16, 64}), buf); err != nil {
			return err
		}
		if err := ds.Close(ctx); err != nil {
			return err
		}
	}
	if err := f.Flush(ctx); err != nil {
		return err
	}
	return f.Close(ctx)
}

func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// ManyDatasetsSCC reopens the file and measures the live Go heap that
// opening every dataset (handles kept, nothing read, so nothing cached)
// adds, per dataset.
func ManyDatasetsSCC(path string, n int) (*ManyDatasetsResult, error) {
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer f.Close(context.Background())
	before := liveHeap()
	dss := make([]*engine.Dataset, n)
	for i := range dss {
		if dss[i], err = f.OpenDataset(context.Background(), manyName(i), nil); err != nil {
			return nil, err
		}
	}
	after := liveHeap()
	runtime.KeepAlive(dss)
	// The handle slice itself is the caller's, not the engine's.
	delta := after - before - int64(n)*8
	return &ManyDatasetsResult{Datasets: n, HeapDelta: delta, PerDataset: float64(delta) / float64(n)}, nil
}

// runManyDatasets is scenario (d).
func runManyDatasets(ctx context.Context, o Options, p *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "manyds")
	if err != nil {
		return err
	}
	defer cleanup()
	n := o.size(10000, 10000, 300)
	path := filepath.Join(dir, "many.scc")
	if err := ManyDatasetsFile(ctx, path, n); err != nil {
		return err
	}
	res, err := ManyDatasetsSCC(path, n)
	if err != nil {
		return err
	}
	o.logf("   scc: %d open datasets cost %s of Go heap, %.0f B each", n, HumanBytes(res.HeapDelta), res.PerDataset)
	f := Figure{Scenario: "manyds", Key: "per-dataset", Metric: fmt.Sprintf("memory per idle open dataset (%d open)", n),
		Unit: "B", SCC: res.PerDataset, Peer: "h5py", Target: &Target{Kind: "max", Value: 2048},
		Note: "scc: live Go heap delta after GC; h5py: process RSS delta (HDF5 + Python objects)"}
	switch {
	case p.Python == "" || p.H5py == "":
		r.missing("h5py (python3-h5py)")
	default:
		var pr peerResult
		if err := runScript(ctx, p, dir, "manyds_peer.py", &pr, fmt.Sprint(n), filepath.Join(dir, "many.h5")); err != nil {
			r.Errors = append(r.Errors, "manyds: peer h5py: "+err.Error())
		} else {
			o.logf("   h5py %s: %.0f B each", pr.Version, pr.PerDataset)
			f.Peer = "h5py " + pr.Version
			f.PeerValue = ptr(pr.PerDataset)
		}
	}
	r.add(f)
	return nil
}
