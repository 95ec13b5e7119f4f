package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd/s3"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// S3Config configures the S3 read scenario (S3Read). Zero fields take the
// defaults named.
type S3Config struct {
	// URL is an s3://bucket/prefix to work under, with endpoint and
	// credentials as for vfd/s3 (URL query, AWS_* environment); the
	// endpoint must speak plain HTTP, since the latency proxy sits in
	// front of it. "" starts a private MinIO in Dir (built by `make
	// minio`) and removes it afterwards.
	URL string
	// Dir holds the private MinIO's data. Default os.TempDir().
	Dir string
	// Datasets, Chunks per dataset and ChunkBytes per chunk (unfiltered
	// uint8 rows, one row per chunk). Defaults 4, 64, 64 KiB.
	Datasets, Chunks, ChunkBytes int
	// Latency is added to every request by the loopback proxy, as a
	// remote object store's round trip. Default 10 ms.
	Latency time.Duration
	// PageSize is the driver's page object size. Default the driver's.
	PageSize int64
	// ScanBox is how many chunks one Read of scc's scan asks for (the
	// naive reader always asks for one). Default 64.
	ScanBox int
	// InFlight lists the driver's MaxInFlight settings the random reads
	// run at. Default 1, 8, 32.
	InFlight []int
}

// Validate reports a configuration S3Read cannot run.
func (c S3Config) Validate() error {
	if c.Datasets < 0 || c.Chunks < 0 || c.ChunkBytes < 0 || c.Latency < 0 || c.PageSize < 0 || c.ScanBox < 0 {
		return fmt.Errorf("bench: s3: negative setting in %+v", c)
	}
	for _, k := range c.InFlight {
		if k < 1 {
			return fmt.Errorf("bench: s3: InFlight %d < 1", k)
		}
	}
	if c.URL != "" && !s3.IsURL(c.URL) {
		return fmt.Errorf("bench: s3: URL %q is not s3://bucket/prefix", c.URL)
	}
	return nil
}

func (c S3Config) withDefaults() S3Config {
	if c.Datasets == 0 {
		c.Datasets = 4
	}
	if c.Chunks == 0 {
		c.Chunks = 64
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = 64 << 10
	}
	if c.Latency == 0 {
		c.Latency = 10 * time.Millisecond
	}
	if c.ScanBox == 0 {
		c.ScanBox = 64
	}
	if len(c.InFlight) == 0 {
		c.InFlight = []int{1, 8, 32}
	}
	return c
}

// S3Result holds the S3 read scenario's figures. "Naive" is scc as a naive
// reader uses an object store: one chunk per request, one GET in flight, no
// coalescing, no prefetch, a cache of two chunks.
type S3Result struct {
	Bytes          int64
	Latency        time.Duration
	NaiveScanMBps  float64
	SCCScanMBps    float64
	NaiveScanGets  int64
	SCCScanGets    int64
	NaiveRandMBps  float64
	SCCRandMBps    []float64 // per InFlight
	InFlight       []int
	RandReadChunks int
}

// S3Read writes datasets of unfiltered chunks to an S3 endpoint (straight,
// no added latency), then reads them through a loopback proxy adding
// cfg.Latency to every request: a sequential scan and random single-chunk
// reads by 32 goroutines, by scc (shared cache, vector reads coalesced into
// ranged GETs, prefetch) at each InFlight setting, and by the naive reader.
// Every chunk read is verified.
func S3Read(ctx context.Context, cfg S3Config) (*S3Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	endpoint, bucket, prefix, stop, err := s3Endpoint(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	proxy, err := s3test.NewProxy(endpoint)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.SetLatency(cfg.Latency)
	key := fmt.Sprintf("%s/s3read-%d.scc", strings.Trim(prefix, "/"), time.Now().UnixNano())
	key = strings.TrimPrefix(key, "/")
	loc := s3.Location{Bucket: bucket, Key: key}
	base := s3Options(endpoint)
	if err := s3Write(ctx, loc, base, cfg); err != nil {
		return nil, err
	}
	res := &S3Result{Bytes: int64(cfg.Datasets * cfg.Chunks * cfg.ChunkBytes), Latency: cfg.Latency, InFlight: cfg.InFlight}
	via := s3Options(proxy.Endpoint())
	via.ReadOnly = true

	naive := via
	naive.MaxInFlight = 1
	naiveCache := cache.Config{QuiescentBytes: int64(2 * cfg.ChunkBytes)}
	var d time.Duration
	if d, res.NaiveScanGets, err = s3Scan(ctx, loc, naive, naiveCache, cfg, 1); err != nil {
		return nil, fmt.Errorf("naive scan: %w", err)
	}
	res.NaiveScanMBps = mibps(res.Bytes, d)
	fast := via
	fast.MaxInFlight = 32
	sccCache := cache.Config{QuiescentBytes: int64(max(64<<20, 4*cfg.ScanBox*cfg.ChunkBytes)), Prefetch: true,
		PrefetchChunks: cfg.ScanBox}
	if d, res.SCCScanGets, err = s3Scan(ctx, loc, fast, sccCache, cfg, cfg.ScanBox); err != nil {
		return nil, fmt.Errorf("scc scan: %w", err)
	}
	res.SCCScanMBps = mibps(res.Bytes, d)

	// Random reads: every chunk once, in a random order, so each is a
	// miss; 32 goroutines issue them.
	res.RandReadChunks = cfg.Datasets * cfg.Chunks
	if d, err = s3Random(ctx, loc, naive, naiveCache, cfg, 1); err != nil {
		return nil, fmt.Errorf("naive random reads: %w", err)
	}
	res.NaiveRandMBps = mibps(res.Bytes, d)
	for _, k := range cfg.InFlight {
		o := via
		o.MaxInFlight = k
		if d, err = s3Random(ctx, loc, o, cache.Config{QuiescentBytes: 64 << 20}, cfg, 32); err != nil {
			return nil, fmt.Errorf("scc random reads, %d in flight: %w", k, err)
		}
		res.SCCRandMBps = append(res.SCCRandMBps, mibps(res.Bytes, d))
	}
	return res, nil
}

func s3Options(endpoint string) s3.Options {
	o := s3.Options{Endpoint: endpoint, Insecure: true}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		o.AccessKey, o.SecretKey = s3test.AccessKey, s3test.SecretKey
	}
	return o
}

// s3Endpoint is cfg.URL's endpoint, bucket and prefix, or a private MinIO.
func s3Endpoint(ctx context.Context, cfg S3Config) (endpoint, bucket, prefix string, stop func(), err error) {
	if cfg.URL != "" {
		var o s3.Options
		loc, err := s3.ParseURL(cfg.URL+"/x", &o)
		if err != nil {
			return "", "", "", nil, err
		}
		ep := strings.TrimPrefix(strings.TrimPrefix(o.Endpoint, "http://"), "https://")
		if ep == "" || strings.HasPrefix(o.Endpoint, "https://") {
			return "", "", "", nil, fmt.Errorf("bench: s3: %s needs a plain-HTTP endpoint (endpoint= or AWS_ENDPOINT_URL) for the latency proxy", cfg.URL)
		}
		return ep, loc.Bucket, strings.TrimSuffix(loc.Key, "x"), func() {}, nil
	}
	dir := cfg.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	tmp, err := os.MkdirTemp(dir, "scc-bench-minio-")
	if err != nil {
		return "", "", "", nil, err
	}
	srv, err := s3test.Start(filepath.Join(tmp, "data"))
	if err != nil {
		os.RemoveAll(tmp)
		return "", "", "", nil, err
	}
	stop = func() { srv.Stop(); os.RemoveAll(tmp) }
	if err := srv.MakeBucket(ctx, "bench"); err != nil {
		stop()
		return "", "", "", nil, err
	}
	return srv.Endpoint(), "bench", "", stop, nil
}

// s3Chunk is the content of chunk i of dataset ds: a pattern whose first
// bytes name it, so a misplaced chunk fails verification.
func s3Chunk(buf []byte, ds, i int) {
	for j := range buf {
		buf[j] = byte(j*7 + ds)
	}
	buf[0], buf[1], buf[2] = byte(ds), byte(i), byte(i>>8)
}

func s3Verify(buf []byte, ds, i int) error {
	if buf[0] != byte(ds) || buf[1] != byte(i) || buf[2] != byte(i>>8) || buf[len(buf)-1] != byte((len(buf)-1)*7+ds) {
		return fmt.Errorf("%w: s3 dataset %d chunk %d", ErrVerify, ds, i)
	}
	return nil
}

func s3Write(ctx context.Context, loc s3.Location, o s3.Options, cfg S3Config) error {
	o.Create = true
	o.PageSize = cfg.PageSize
	drv, err := s3.OpenLocation(ctx, loc, &o)
	if err != nil {
		return err
	}
	defer drv.Close()
	f, err := engine.Create(ctx, "", &engine.Options{Driver: drv})
	if err != nil {
		return err
	}
	buf := make([]byte, cfg.ChunkBytes)
	for ds := range cfg.Datasets {
		d, err := f.CreateDataset(ctx, fmt.Sprintf("d%02d", ds), engine.DatasetSpec{Type: engine.Uint8,
			Shape: []uint64{uint64(cfg.Chunks), uint64(cfg.ChunkBytes)}, Chunk: []uint64{1, uint64(cfg.ChunkBytes)}})
		if err != nil {
			f.Close(ctx)
			return err
		}
		for i := range cfg.Chunks {
			s3Chunk(buf, ds, i)
			if err := d.Write(ctx, engine.Box([]uint64{uint64(i), 0}, []uint64{1, uint64(cfg.ChunkBytes)}), buf); err != nil {
				f.Close(ctx)
				return err
			}
		}
	}
	return f.Close(ctx)
}

// s3Open opens the file read-only through its own driver and cache.
func s3Open(ctx context.Context, loc s3.Location, o s3.Options, cc cache.Config) (*engine.File, *s3.Driver, func(), error) {
	drv, err := s3.OpenLocation(ctx, loc, &o)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := cache.New(cc)
	if err != nil {
		drv.Close()
		return nil, nil, nil, err
	}
	f, err := engine.Open(ctx, "", &engine.Options{Driver: drv, ReadOnly: true, Cache: c})
	if err != nil {
		c.Close()
		drv.Close()
		return nil, nil, nil, err
	}
	return f, drv, func() { f.Close(ctx); c.Close(); drv.Close() }, nil
}

// s3Scan reads every dataset in order, box chunks per Read (1: one chunk
// per request), timing from open to the last byte, and counts the GETs.
func s3Scan(ctx context.Context, loc s3.Location, o s3.Options, cc cache.Config, cfg S3Config, box int) (time.Duration, int64, error) {
	t0 := time.Now()
	f, drv, done, err := s3Open(ctx, loc, o, cc)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	buf := make([]byte, box*cfg.ChunkBytes)
	for ds := range cfg.Datasets {
		d, err := f.OpenDataset(ctx, fmt.Sprintf("d%02d", ds), nil)
		if err != nil {
			return 0, 0, err
		}
		for i := 0; i < cfg.Chunks; i += box {
			n := min(box, cfg.Chunks-i)
			b := buf[:n*cfg.ChunkBytes]
			if err := d.Read(ctx, engine.Box([]uint64{uint64(i), 0}, []uint64{uint64(n), uint64(cfg.ChunkBytes)}), b); err != nil {
				return 0, 0, err
			}
			for k := range n {
				if err := s3Verify(b[k*cfg.ChunkBytes:(k+1)*cfg.ChunkBytes], ds, i+k); err != nil {
					return 0, 0, err
				}
			}
		}
	}
	return time.Since(t0), drv.Stats().Gets, nil
}

// s3Random reads every chunk once in a random order by g goroutines; the
// time excludes the open.
func s3Random(ctx context.Context, loc s3.Location, o s3.Options, cc cache.Config, cfg S3Config, g int) (time.Duration, error) {
	f, _, done, err := s3Open(ctx, loc, o, cc)
	if err != nil {
		return 0, err
	}
	defer done()
	dss := make([]*engine.Dataset, cfg.Datasets)
	for i := range dss {
		if dss[i], err = f.OpenDataset(ctx, fmt.Sprintf("d%02d", i), nil); err != nil {
			return 0, err
		}
	}
	order := rand.New(rand.NewPCG(3, 5)).Perm(cfg.Datasets * cfg.Chunks)
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	t0 := time.Now()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, cfg.ChunkBytes)
			for {
				k := int(next.Add(1) - 1)
				if k >= len(order) || first.Load() != nil {
					return
				}
				ds, i := order[k]/cfg.Chunks, order[k]%cfg.Chunks
				err := dss[ds].Read(ctx, engine.Box([]uint64{uint64(i), 0}, []uint64{1, uint64(cfg.ChunkBytes)}), buf)
				if err == nil {
					err = s3Verify(buf, ds, i)
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return 0, *p
	}
	return time.Since(t0), nil
}

// runS3 is the "s3" scenario. With Options.Dir an s3:// URL it runs against
// that endpoint, else against a private MinIO.
func runS3(ctx context.Context, o Options, _ *Peers, r *Report) error {
	cfg := S3Config{Chunks: o.size(128, 64, 16)}
	if s3.IsURL(o.Dir) {
		cfg.URL = o.Dir
	} else {
		cfg.Dir = o.Dir
	}
	cfg = cfg.withDefaults()
	o.logf("   %d datasets × %d chunks of %s, %s added per request", cfg.Datasets, cfg.Chunks, HumanBytes(int64(cfg.ChunkBytes)), cfg.Latency)
	res, err := S3Read(ctx, cfg)
	if err != nil {
		return err
	}
	o.logf("   scan: scc %.1f MiB/s (%d GETs), naive %.1f MiB/s (%d GETs)", res.SCCScanMBps, res.SCCScanGets, res.NaiveScanMBps, res.NaiveScanGets)
	r.add(Figure{Scenario: "s3", Key: "scan", Metric: fmt.Sprintf("sequential scan of %s over S3 (MinIO, +%s per request)", HumanBytes(res.Bytes), res.Latency),
		Unit: "MiB/s", HigherIsBetter: true, SCC: res.SCCScanMBps, Peer: "naive reader: one chunk per GET, no cache",
		PeerValue: ptr(res.NaiveScanMBps), Target: &Target{Kind: "ratio", Value: 10}})
	for i, k := range res.InFlight {
		o.logf("   random reads, %d in flight: scc %.1f MiB/s, naive %.1f MiB/s", k, res.SCCRandMBps[i], res.NaiveRandMBps)
		r.add(Figure{Scenario: "s3", Key: fmt.Sprintf("rand-inflight=%d", k),
			Metric: fmt.Sprintf("random chunk reads by 32 goroutines, %d requests in flight", k),
			Unit:   "MiB/s", HigherIsBetter: true, SCC: res.SCCRandMBps[i], Peer: "naive reader: one chunk per GET, one in flight",
			PeerValue: ptr(res.NaiveRandMBps)})
	}
	return nil
}
