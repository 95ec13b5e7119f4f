package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/engine"
)

// ingestSize is the ingest scenario's workload for a size class.
func ingestSize(o Options) IngestConfig {
	side := o.size(256, 256, 32)
	return IngestConfig{
		Datasets:   4,
		Frames:     o.size(256, 64, 6),
		Height:     side,
		Width:      side,
		Readers:    -1,
		Filters:    []engine.Filter{engine.Deflate(1)},
		CacheBytes: 64 << 20,
		Dir:        o.Dir,
	}
}

// writeFrames writes every frame of cfg, dataset-major, as the peers read
// them: the same bytes FillFrame gives scc's writers.
func writeFrames(path string, cfg IngestConfig) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, cfg.Height*cfg.Width*2)
	for d := 0; d < cfg.Datasets; d++ {
		for fr := 0; fr < cfg.Frames; fr++ {
			FillFrame(buf, d, fr)
			if _, err := fh.Write(buf); err != nil {
				fh.Close()
				return err
			}
		}
	}
	return fh.Close()
}

// peerResult is what a Python peer script prints.
type peerResult struct {
	Peer        string  `json:"peer"`
	Version     string  `json:"version"`
	Seconds     float64 `json:"seconds"`
	Bytes       int64   `json:"bytes"`
	StoredBytes int64   `json:"stored_bytes"`
	Reads       int64   `json:"reads"`
	PerDataset  float64 `json:"bytes_per_dataset"`
	Datasets    int     `json:"datasets"`
}

func (p peerResult) mibps() float64 {
	if p.Seconds <= 0 {
		return 0
	}
	return float64(p.Bytes) / mib / p.Seconds
}

// runIngestScenario is scenario (b): frames appended with deflate level 1
// by scc at 1, 2 and 4 writer goroutines, and by h5py and zarr-python
// (single-threaded: HDF5 holds one global lock) writing the same bytes.
func runIngestScenario(ctx context.Context, o Options, p *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "ingest")
	if err != nil {
		return err
	}
	defer cleanup()
	cfg := ingestSize(o)
	cfg.Dir = dir
	total := int64(cfg.Datasets*cfg.Frames*cfg.Height*cfg.Width) * 2
	o.logf("   %d datasets × %d frames of %dx%d uint16 (%s), deflate level 1",
		cfg.Datasets, cfg.Frames, cfg.Height, cfg.Width, HumanBytes(total))

	writers := []int{1, 2, 4}
	sccLine := Line{Label: "scc (deflate 1)"}
	byWriters := map[int]float64{}
	for _, w := range writers {
		c := cfg
		c.Writers = w
		res, err := Ingest(ctx, c)
		if err != nil {
			return fmt.Errorf("scc with %d writers: %w", w, err)
		}
		o.logf("   scc %d writer(s): %.1f MiB/s (stored %s)", w, res.WriteMBps, HumanBytes(res.StoredBytes))
		byWriters[w] = res.WriteMBps
		sccLine.X = append(sccLine.X, float64(w))
		sccLine.Y = append(sccLine.Y, res.WriteMBps)
	}
	lines := []Line{sccLine}

	peers := map[string]*peerResult{}
	want := p.pythonPeers(r)
	if len(want) > 0 {
		bin := filepath.Join(dir, "frames.bin")
		if err := writeFrames(bin, cfg); err != nil {
			return err
		}
		for _, kind := range want {
			var pr peerResult
			out := filepath.Join(dir, "peer-"+kind)
			err := runScript(ctx, p, dir, "ingest_peer.py", &pr, kind, bin,
				fmt.Sprint(cfg.Datasets), fmt.Sprint(cfg.Frames), fmt.Sprint(cfg.Height), fmt.Sprint(cfg.Width), out)
			if err != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("ingest: peer %s: %v", kind, err))
				continue
			}
			o.logf("   %s %s: %.1f MiB/s (stored %s)", kind, pr.Version, pr.mibps(), HumanBytes(pr.StoredBytes))
			peers[kind] = &pr
			l := Line{Label: kind + " (1 thread)"}
			for _, w := range writers {
				l.X = append(l.X, float64(w))
				l.Y = append(l.Y, pr.mibps())
			}
			lines = append(lines, l)
		}
	}
	top := writers[len(writers)-1]
	for _, kind := range []string{"h5py", "zarr"} {
		f := Figure{Scenario: "ingest", Key: fmt.Sprintf("w%d", top), Unit: "MiB/s", HigherIsBetter: true,
			Metric: fmt.Sprintf("deflate-1 append, scc %d writers", top), SCC: byWriters[top], Peer: kind}
		f1 := Figure{Scenario: "ingest", Key: "w1", Unit: "MiB/s", HigherIsBetter: true,
			Metric: "deflate-1 append, scc 1 writer", SCC: byWriters[1], Peer: kind}
		if kind == "h5py" {
			f.Target = &Target{Kind: "ratio", Value: 1.8}
		}
		if pr := peers[kind]; pr != nil {
			f.Peer, f1.Peer = kind+" "+pr.Version, kind+" "+pr.Version
			f.PeerValue, f1.PeerValue = ptr(pr.mibps()), ptr(pr.mibps())
		}
		f.Note = "peers are single-threaded; every time includes close and fsync of all that was written"
		r.add(f)
		r.add(f1)
	}
	r.Series = append(r.Series, Series{
		File: "ingest_throughput_vs_goroutines.png", Title: "deflate-1 ingest",
		XLabel: "writer goroutines", YLabel: "MiB/s", Lines: lines,
	})
	return nil
}
