package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// Many writer processes, one array: each writer process appends frames to
// its own file, round robin (frame g of the whole goes to writer g%N, as
// its frame g/N), and a small file holds a virtual dataset whose strided,
// unlimited mappings stitch the writers' datasets back into one array in
// frame order. VirtualIngest is that job (scctl ingest --procs) and the
// "virtual" scenario measures it.
//
// The writers are this same executable run again: vwriterEnv carries a
// writer's configuration, and the init below turns the process into the
// writer before main (or a test binary's TestMain) runs, so that every
// binary that can run the job (scctl, the test binaries of the packages
// that run it) can start its own writers without a subcommand of its own.

// vwriterEnv names the environment variable that makes a process a writer.
const vwriterEnv = "SCC_BENCH_VIRTUAL_WRITER"

func init() {
	if cfg := os.Getenv(vwriterEnv); cfg != "" {
		os.Exit(virtualWriterMain(cfg, os.Stdin, os.Stdout))
	}
}

// vwriterConfig is one writer process's job.
type vwriterConfig struct {
	Path          string // the writer's file, made by the parent with its dataset
	Index         int    // i: it writes global frames i, i+N, i+2N, ...
	Writers       int    // N
	Frames        int    // frames it writes
	Height, Width int
	CacheBytes    int64
	// FlushEvery is how many frames go between Flushes (0: only the
	// final one); Interval paces the frames (0: as fast as it can).
	FlushEvery int
	Interval   time.Duration
	// Sync: the Flushes fsync (engine.Options.NoSync false).
	Sync bool
	// Goroutines share the process's frames (goroutine k writes its
	// frames k, k+Goroutines, ...), growing the extent as they go; 0 or 1
	// is one. More than one is the one-process baseline of the ingest
	// benchmark, and takes no FlushEvery (acknowledgements count frames
	// in order).
	Goroutines int
}

// virtualDataset is the name of the writers' datasets and of the virtual
// dataset over them.
const virtualDataset = "frames"

// virtualWriterMain is a writer process. It prints "ready" once its file
// is open, waits for a line on stdin (so that every writer starts at
// once, after the others have started too), appends its frames, printing
// "ack J T" after each Flush that made its first J frames durable (T: the
// Unix time in nanoseconds when that Flush returned), and "done" after
// the file is closed. Anything else it prints is an error.
func virtualWriterMain(cfgJSON string, stdin io.Reader, stdout io.Writer) int {
	var cfg vwriterConfig
	fail := func(err error) int {
		fmt.Fprintln(stdout, "error", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return fail(err)
	}
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: max(cfg.CacheBytes, 1<<20)})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	f, err := engine.Open(ctx, cfg.Path, &engine.Options{Cache: c, NoSync: !cfg.Sync})
	if err != nil {
		return fail(err)
	}
	ds, err := f.OpenDataset(ctx, virtualDataset, nil)
	if err != nil {
		f.Close(ctx)
		return fail(err)
	}
	fmt.Fprintln(stdout, "ready")
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		f.Close(ctx)
		return fail(fmt.Errorf("waiting for the start: %w", err))
	}
	h, w := uint64(cfg.Height), uint64(cfg.Width)
	goroutines := max(cfg.Goroutines, 1)
	if goroutines > 1 && (cfg.FlushEvery > 0 || cfg.Interval > 0) {
		f.Close(ctx)
		return fail(errors.New("several goroutines take neither FlushEvery nor Interval"))
	}
	var (
		mu     sync.Mutex // protects extent, and orders the SetExtent calls
		extent int
	)
	write := func(k int) error {
		buf := make([]byte, 2*h*w)
		next := time.Now()
		for j := k; j < cfg.Frames; j += goroutines {
			if cfg.Interval > 0 {
				next = next.Add(cfg.Interval)
				time.Sleep(time.Until(next))
			}
			mu.Lock()
			if j >= extent {
				if err := ds.SetExtent(ctx, []uint64{uint64(j + 1), h, w}); err != nil {
					mu.Unlock()
					return err
				}
				extent = j + 1
			}
			mu.Unlock()
			FillFrame(buf, 0, j*cfg.Writers+cfg.Index)
			if err := ds.Write(ctx, engine.Box([]uint64{uint64(j), 0, 0}, []uint64{1, h, w}), buf); err != nil {
				return err
			}
			if cfg.FlushEvery > 0 && (j+1)%cfg.FlushEvery == 0 {
				if err := f.Flush(ctx); err != nil {
					return err
				}
				fmt.Fprintln(stdout, "ack", j+1, time.Now().UnixNano())
			}
		}
		return nil
	}
	var g errgroup.Group
	for k := 0; k < goroutines; k++ {
		g.Go(func() error { return write(k) })
	}
	if err := g.Wait(); err != nil {
		f.Close(ctx)
		return fail(err)
	}
	if err := f.Flush(ctx); err != nil {
		f.Close(ctx)
		return fail(err)
	}
	fmt.Fprintln(stdout, "ack", cfg.Frames, time.Now().UnixNano())
	if err := f.Close(ctx); err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, "done")
	return 0
}

// VirtualIngestConfig is a multi-process ingest: Writers processes, each
// appending Frames frames to its own file, and a virtual dataset over
// them.
type VirtualIngestConfig struct {
	// Dir holds the files: Name+".scc" (the virtual dataset) and
	// Name+"-w0.scc", ... (the writers' files, named relative to it). It
	// must exist.
	Dir string
	// Name is the files' base name; default "virtual".
	Name string
	// Writers is the number of writer processes. Default 4.
	Writers int
	// Frames per writer. Default 128.
	Frames int
	// Height and Width of a frame in uint16 elements; default 256×256, at
	// least 8 elements (a frame carries its own header, FillFrame).
	Height, Width int
	// Filters of the writers' datasets; nil means shuffle + deflate 1.
	Filters []engine.Filter
	// CacheBytes is each writer's cache. Default 32 MiB.
	CacheBytes int64
	// FlushEvery and Interval: as vwriterConfig (0: one Flush at the end,
	// no pacing).
	FlushEvery int
	Interval   time.Duration
	// Sync makes the writers' Flushes fsync.
	Sync bool
	// Verify reads the whole virtual dataset back when the writers are
	// done and checks every frame (VerifyFrame).
	Verify bool
	// OnAck, when set, is called (from one goroutine per writer) for each
	// acknowledgement: writer i's first frames frames became durable at
	// t.
	OnAck func(writer, frames int, t time.Time) `json:"-"`
}

func (c VirtualIngestConfig) withDefaults() VirtualIngestConfig {
	if c.Name == "" {
		c.Name = "virtual"
	}
	if c.Writers == 0 {
		c.Writers = 4
	}
	if c.Frames == 0 {
		c.Frames = 128
	}
	if c.Height == 0 {
		c.Height = 256
	}
	if c.Width == 0 {
		c.Width = 256
	}
	if c.Filters == nil {
		c.Filters = []engine.Filter{engine.Shuffle(), engine.Deflate(1)}
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 32 << 20
	}
	return c
}

// Validate reports whether c (with its defaults) is usable.
func (c VirtualIngestConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Dir == "":
		return errors.New("bench: VirtualIngestConfig.Dir is required")
	case c.Writers < 1 || c.Writers > 1024:
		return fmt.Errorf("bench: %d writer processes (1..1024)", c.Writers)
	case c.Frames < 1 || c.Height < 1 || c.Width < 1 || c.Height*c.Width < 8:
		return fmt.Errorf("bench: %d frames of %dx%d (at least 1 frame of 8 elements)", c.Frames, c.Height, c.Width)
	case c.Writers*c.Frames > 1<<31:
		return fmt.Errorf("bench: %d frames in all", c.Writers*c.Frames)
	case c.FlushEvery < 0 || c.Interval < 0:
		return errors.New("bench: negative FlushEvery or Interval")
	}
	return nil
}

// VirtualIngestResult is what VirtualIngest measured.
type VirtualIngestResult struct {
	Writers, Frames, Height, Width int
	Filters                        string
	// VirtualPath is the virtual dataset's file, SourcePaths the writers'.
	VirtualPath string
	SourcePaths []string
	// BytesWritten is every frame's decoded size; WriteTime from the
	// moment every writer was told to start to the last one's close
	// (its final Flush included), WriteMBps the aggregate rate.
	BytesWritten int64
	WriteTime    time.Duration
	WriteMBps    float64
	// WriteCPU is the user and system time of the writer processes, their
	// start-up included.
	WriteCPU time.Duration
	// StoredBytes is the size of all the files.
	StoredBytes int64
	// With Verify: the whole virtual dataset read back and every frame
	// checked.
	FramesVerified int
	ReadTime       time.Duration
	ReadMBps       float64
}

// VirtualFiles creates the files of a multi-process ingest: each writer's
// file with its empty, growable dataset, and the virtual file whose
// mappings send frame g to frame g/N of writer g%N. It returns the
// virtual file's path and the writers'.
func VirtualFiles(ctx context.Context, cfg VirtualIngestConfig) (vpath string, sources []string, err error) {
	if err := cfg.Validate(); err != nil {
		return "", nil, err
	}
	cfg = cfg.withDefaults()
	n, h, w := uint64(cfg.Writers), uint64(cfg.Height), uint64(cfg.Width)
	var maps []engine.VirtualMapping
	for i := 0; i < cfg.Writers; i++ {
		name := fmt.Sprintf("%s-w%d.scc", cfg.Name, i)
		path := filepath.Join(cfg.Dir, name)
		f, err := engine.Create(ctx, path, &engine.Options{NoSync: !cfg.Sync})
		if err != nil {
			return "", nil, err
		}
		_, err = f.CreateDataset(ctx, virtualDataset, engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{0, h, w},
			MaxShape: []uint64{engine.Unlimited, h, w}, Chunk: []uint64{1, h, w}, Filters: cfg.Filters})
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			return "", nil, err
		}
		sources = append(sources, path)
		maps = append(maps, engine.VirtualMapping{
			Virtual: engine.Hyperslab([]uint64{uint64(i), 0, 0}, []uint64{n, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, h, w}),
			File:    name, Dataset: virtualDataset,
			Source: engine.Hyperslab([]uint64{0, 0, 0}, nil, []uint64{engine.Unlimited, 1, 1}, []uint64{1, h, w}),
		})
	}
	vpath = filepath.Join(cfg.Dir, cfg.Name+".scc")
	f, err := engine.Create(ctx, vpath, &engine.Options{NoSync: !cfg.Sync})
	if err != nil {
		return "", nil, err
	}
	_, err = f.CreateVirtualDataset(ctx, virtualDataset, engine.VirtualSpec{Type: engine.Uint16,
		Shape: []uint64{0, h, w}, MaxShape: []uint64{engine.Unlimited, h, w}, Mappings: maps})
	if cerr := f.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return "", nil, err
	}
	return vpath, sources, nil
}

// VirtualIngest runs the job: the files (VirtualFiles), the writer
// processes started together, and with Verify the whole virtual dataset
// read back and checked.
func VirtualIngest(ctx context.Context, cfg VirtualIngestConfig) (*VirtualIngestResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	vpath, sources, err := VirtualFiles(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res := &VirtualIngestResult{Writers: cfg.Writers, Frames: cfg.Frames, Height: cfg.Height, Width: cfg.Width,
		Filters: FilterNames(cfg.Filters), VirtualPath: vpath, SourcePaths: sources,
		BytesWritten: int64(cfg.Writers) * int64(cfg.Frames) * int64(2*cfg.Height*cfg.Width)}
	t, err := runWriters(ctx, cfg, sources)
	if err != nil {
		return nil, err
	}
	res.WriteTime, res.WriteCPU = t.Wall, t.CPU
	res.WriteMBps = mibps(res.BytesWritten, res.WriteTime)
	for _, p := range append([]string{vpath}, sources...) {
		if st, err := os.Stat(p); err == nil {
			res.StoredBytes += st.Size()
		}
	}
	if cfg.Verify {
		t0 := time.Now()
		n, err := ReadVirtual(ctx, vpath, 4, cfg.CacheBytes, true)
		if err != nil {
			return nil, err
		}
		res.ReadTime = time.Since(t0)
		res.ReadMBps = mibps(int64(n)*int64(2*cfg.Height*cfg.Width), res.ReadTime)
		res.FramesVerified = n
		if want := cfg.Writers * cfg.Frames; n != want {
			return nil, fmt.Errorf("%w: the virtual dataset holds %d frames, the writers wrote %d", ErrVerify, n, want)
		}
	}
	return res, nil
}

// runWriters starts one writer process per source, waits until all are
// ready, starts them together and waits for them to finish; it returns
// the time from the start to the last writer's close.
func runWriters(ctx context.Context, cfg VirtualIngestConfig, sources []string) (procsTime, error) {
	jobs := make([]vwriterConfig, len(sources))
	for i, path := range sources {
		jobs[i] = vwriterConfig{Path: path, Index: i, Writers: cfg.Writers, Frames: cfg.Frames, Height: cfg.Height, Width: cfg.Width,
			CacheBytes: cfg.CacheBytes, FlushEvery: cfg.FlushEvery, Interval: cfg.Interval, Sync: cfg.Sync}
	}
	return runProcs(ctx, jobs, cfg.OnAck)
}

// procsTime is what runProcs measured: Wall from the start to the last
// writer's close, CPU the user and system time of all the processes,
// start-up included.
type procsTime struct{ Wall, CPU time.Duration }

// runProcs runs one writer process per job (virtualWriterMain) as
// runWriters says, onAck (if set) called for each acknowledgement.
func runProcs(ctx context.Context, jobs []vwriterConfig, onAck func(writer, frames int, t time.Time)) (procsTime, error) {
	self, err := os.Executable()
	if err != nil {
		return procsTime{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		lines chan string // closed when the process's stdout is
		errb  strings.Builder
	}
	procs := make([]*proc, 0, len(jobs))
	var (
		wg  sync.WaitGroup
		cpu atomic.Int64
	)
	// On an error the writers still running are killed (the context of
	// their commands); either way every one is waited for.
	defer wg.Wait()
	defer cancel()
	for _, wc := range jobs {
		b, err := json.Marshal(wc)
		if err != nil {
			return procsTime{}, err
		}
		p := &proc{cmd: exec.CommandContext(ctx, self), lines: make(chan string, 16)}
		p.cmd.Env = append(os.Environ(), vwriterEnv+"="+string(b))
		p.cmd.Stderr = &limitedWriter{b: &p.errb, n: 4096}
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return procsTime{}, err
		}
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			return procsTime{}, err
		}
		if err := p.cmd.Start(); err != nil {
			return procsTime{}, err
		}
		procs = append(procs, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Wait only once stdout is read to its end: Wait closes it.
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				select {
				case p.lines <- sc.Text():
				case <-ctx.Done(): // nobody listens: drain
				}
			}
			close(p.lines)
			if p.cmd.Wait() == nil {
				cpu.Add(int64(p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()))
			}
		}()
	}
	next := func(p *proc) (string, bool) {
		select {
		case l, ok := <-p.lines:
			return l, ok
		case <-ctx.Done():
			return "", false
		}
	}
	fail := func(i int, what string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("writer process %d: %s %s", i, what, strings.TrimSpace(procs[i].errb.String()))
	}
	for i, p := range procs {
		if l, ok := next(p); !ok || l != "ready" {
			return procsTime{}, fail(i, "did not start: "+l)
		}
	}
	start := time.Now()
	for i, p := range procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			return procsTime{}, fail(i, err.Error())
		}
		p.stdin.Close()
	}
	var last atomic.Int64
	errs := make(chan error, len(procs))
	for i, p := range procs {
		go func() {
			for {
				line, ok := next(p)
				if !ok {
					errs <- fail(i, "exited before it was done")
					return
				}
				f := strings.Fields(line)
				switch {
				case len(f) == 3 && f[0] == "ack":
					j, err1 := strconv.Atoi(f[1])
					ns, err2 := strconv.ParseInt(f[2], 10, 64)
					if err1 != nil || err2 != nil {
						errs <- fail(i, "said "+line)
						return
					}
					if onAck != nil {
						onAck(i, j, time.Unix(0, ns))
					}
				case line == "done":
					end := int64(time.Since(start))
					for old := last.Load(); end > old && !last.CompareAndSwap(old, end); old = last.Load() {
					}
					errs <- nil
					return
				default:
					errs <- fail(i, "said "+line)
					return
				}
			}
		}()
	}
	var first error
	for range procs {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // the others are killed, and answer at once
		}
	}
	if first != nil {
		return procsTime{}, first
	}
	wg.Wait() // every process has exited: its CPU time is counted
	return procsTime{Wall: time.Duration(last.Load()), CPU: time.Duration(cpu.Load())}, nil
}

// limitedWriter keeps the first n bytes written to it (a writer's stderr,
// for the error message).
type limitedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
	n  int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.n - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// virtualReadBatch is how many frames one read of ReadVirtual asks for.
const virtualReadBatch = 16

// ReadVirtual reads the whole virtual dataset of the file at path with g
// goroutines, each reading a contiguous range of frames in batches,
// through a fresh cache of cacheBytes; with verify it checks every frame
// (VerifyFrame: frame g of dataset 0). It returns the number of frames.
func ReadVirtual(ctx context.Context, path string, g int, cacheBytes int64, verify bool) (int, error) {
	c, err := cache.New(cache.Config{QuiescentBytes: cacheBytes})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	f, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true, Cache: c})
	if err != nil {
		return 0, err
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, virtualDataset, nil)
	if err != nil {
		return 0, err
	}
	defer ds.Close(ctx)
	shape := ds.Shape()
	n := int(shape[0])
	err = splitFrames(ctx, n, g, func(lo, hi int, buf []byte) error {
		sel := engine.Box([]uint64{uint64(lo), 0, 0}, []uint64{uint64(hi - lo), shape[1], shape[2]})
		if err := ds.Read(ctx, sel, buf); err != nil {
			return err
		}
		if verify {
			return verifyFrames(buf, lo, hi)
		}
		return nil
	}, 2*shape[1]*shape[2])
	return n, err
}

// ReadSources reads the frames of the writers' files directly, as
// ReadVirtual reads them through the virtual dataset: g goroutines, each
// a contiguous range of the whole's frames, batch by batch, every source's
// part of a batch read as one box of the source.
func ReadSources(ctx context.Context, sources []string, g int, cacheBytes int64, verify bool) (int, error) {
	c, err := cache.New(cache.Config{QuiescentBytes: cacheBytes})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	nw := len(sources)
	dss := make([]*engine.Dataset, nw)
	n := 0
	var shape []uint64
	for i, p := range sources {
		f, err := engine.Open(ctx, p, &engine.Options{ReadOnly: true, Cache: c})
		if err != nil {
			return 0, err
		}
		defer f.Close(ctx)
		if dss[i], err = f.OpenDataset(ctx, virtualDataset, nil); err != nil {
			return 0, err
		}
		defer dss[i].Close(ctx)
		shape = dss[i].Shape()
		n += int(shape[0])
	}
	fb := 2 * shape[1] * shape[2]
	err = splitFrames(ctx, n, g, func(lo, hi int, buf []byte) error {
		// Writer i holds the whole's frames i, i+nw, ...: those in
		// [lo, hi) are its frames ceil((lo-i)/nw) .. ceil((hi-i)/nw).
		off := uint64(0)
		for i, ds := range dss {
			a, b := max(0, (lo-i+nw-1)/nw), max(0, (hi-i+nw-1)/nw)
			if b <= a {
				continue
			}
			part := buf[off : off+uint64(b-a)*fb]
			if err := ds.Read(ctx, engine.Box([]uint64{uint64(a), 0, 0}, []uint64{uint64(b - a), shape[1], shape[2]}), part); err != nil {
				return err
			}
			if verify {
				for j := a; j < b; j++ {
					if err := VerifyFrame(part[uint64(j-a)*fb:uint64(j-a+1)*fb], 0, j*nw+i); err != nil {
						return err
					}
				}
			}
			off += uint64(b-a) * fb
		}
		return nil
	}, fb)
	return n, err
}

// splitFrames runs read over [0, n) frames split into g contiguous ranges
// read concurrently in batches of virtualReadBatch frames, each with its
// own buffer.
func splitFrames(ctx context.Context, n, g int, read func(lo, hi int, buf []byte) error, frameBytes uint64) error {
	g = max(1, min(g, n))
	errs := make(chan error, g)
	for k := 0; k < g; k++ {
		lo, hi := n*k/g, n*(k+1)/g
		go func() {
			buf := make([]byte, virtualReadBatch*frameBytes)
			for a := lo; a < hi; a += virtualReadBatch {
				if err := ctx.Err(); err != nil {
					errs <- err
					return
				}
				b := min(hi, a+virtualReadBatch)
				if err := read(a, b, buf[:uint64(b-a)*frameBytes]); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for k := 0; k < g; k++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func verifyFrames(buf []byte, lo, hi int) error {
	fb := len(buf) / (hi - lo)
	for g := lo; g < hi; g++ {
		if err := VerifyFrame(buf[(g-lo)*fb:(g-lo+1)*fb], 0, g); err != nil {
			return err
		}
	}
	return nil
}

// IngestOneProcess is the baseline of the multi-process ingest: the same
// frames (cfg.Writers × cfg.Frames, of the same content) appended to one
// file by one writer process with cfg.Writers goroutines, started and
// timed as the writer processes of VirtualIngest are: a process of its
// own, so that both sides start with a fresh runtime, heap and cache.
func IngestOneProcess(ctx context.Context, path string, cfg VirtualIngestConfig) (procsTime, error) {
	if err := cfg.Validate(); err != nil {
		return procsTime{}, err
	}
	cfg = cfg.withDefaults()
	h, w := uint64(cfg.Height), uint64(cfg.Width)
	f, err := engine.Create(ctx, path, &engine.Options{NoSync: !cfg.Sync})
	if err != nil {
		return procsTime{}, err
	}
	_, err = f.CreateDataset(ctx, virtualDataset, engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{0, h, w},
		MaxShape: []uint64{engine.Unlimited, h, w}, Chunk: []uint64{1, h, w}, Filters: cfg.Filters})
	if cerr := f.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return procsTime{}, err
	}
	return runProcs(ctx, []vwriterConfig{{Path: path, Writers: 1, Frames: cfg.Writers * cfg.Frames, Height: cfg.Height, Width: cfg.Width,
		CacheBytes: cfg.CacheBytes, Sync: cfg.Sync, Goroutines: cfg.Writers}}, nil)
}

// FollowResult is the latency of a reader following live writers.
type FollowResult struct {
	Frames int
	// Latencies, one per frame, from the Flush that made the frame
	// durable returning in its writer to the reader having read it (0
	// when the reader read it before that Flush returned: the commit is
	// visible once its superblock is written).
	Latencies []time.Duration
}

// FollowVirtual runs cfg's writers (cfg.FlushEvery and Interval set) and,
// in this process, a reader that polls the virtual dataset every poll:
// Refresh, then read every frame the extent now covers that it has not
// yet seen, checking each. A frame that reads as the fill value is not
// there yet (its writer has grown the extent of another's mapping only).
func FollowVirtual(ctx context.Context, cfg VirtualIngestConfig, poll time.Duration) (*FollowResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	total := cfg.Writers * cfg.Frames
	var mu sync.Mutex
	flushed := make([]time.Time, total) // when the frame's Flush returned
	acked := make([]int, cfg.Writers)
	cfg.OnAck = func(i, frames int, t time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for j := acked[i]; j < frames; j++ {
			flushed[j*cfg.Writers+i] = t
		}
		acked[i] = max(acked[i], frames)
	}
	vpath, sources, err := VirtualFiles(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cache.Config{QuiescentBytes: cfg.CacheBytes})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	f, err := engine.Open(ctx, vpath, &engine.Options{ReadOnly: true, Cache: c})
	if err != nil {
		return nil, err
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, virtualDataset, nil)
	if err != nil {
		return nil, err
	}
	defer ds.Close(ctx)
	h, w := uint64(cfg.Height), uint64(cfg.Width)
	seen := make([]time.Time, total)
	nseen := 0
	fb := 2 * h * w
	buf := make([]byte, fb)
	fill := make([]byte, fb)
	poll1 := func() error {
		if err := ds.Refresh(ctx); err != nil {
			if errors.Is(err, engine.ErrStale) {
				return nil // the writer moved on while we looked: next poll
			}
			return err
		}
		n := min(int(ds.Shape()[0]), total)
		for g := 0; g < n; g++ {
			if !seen[g].IsZero() {
				continue
			}
			err := ds.Read(ctx, engine.Box([]uint64{uint64(g), 0, 0}, []uint64{1, h, w}), buf)
			switch {
			case errors.Is(err, engine.ErrStale):
				return nil
			case err != nil:
				return err
			}
			if string(buf) == string(fill) {
				continue
			}
			if err := VerifyFrame(buf, 0, g); err != nil {
				return err
			}
			seen[g] = time.Now()
			nseen++
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := runWriters(ctx, cfg, sources)
		done <- err
	}()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	writing := true
	for writing || nseen < total {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			writing = false
		case <-tick.C:
		case <-ctx.Done():
			if writing {
				<-done
			}
			return nil, ctx.Err()
		}
		if err := poll1(); err != nil {
			if writing {
				<-done
			}
			return nil, err
		}
		if !writing && nseen < total {
			// Every writer closed: the rest must be there now.
			if err := poll1(); err != nil {
				return nil, err
			}
			if nseen < total {
				return nil, fmt.Errorf("%w: %d of %d frames readable after every writer closed", ErrVerify, nseen, total)
			}
		}
	}
	res := &FollowResult{Frames: total}
	mu.Lock()
	defer mu.Unlock()
	for g := 0; g < total; g++ {
		if flushed[g].IsZero() {
			return nil, fmt.Errorf("frame %d was never acknowledged", g)
		}
		res.Latencies = append(res.Latencies, max(0, seen[g].Sub(flushed[g])))
	}
	return res, nil
}

// Quantile returns the q-quantile (0..1) of ds, nearest rank.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

// The scenario's reads run through a cache this large, the same for the
// virtual dataset and for the sources read directly.
const virtualReadCache = 64 << 20

// runVirtual is the "virtual" scenario: (a) the multi-process ingest
// beside one process writing the same frames with as many goroutines into
// one file; (b) reading the whole virtual dataset beside reading the same
// frames from the sources directly, and beside h5py reading the
// equivalent HDF5 virtual dataset; (c) the latency of a reader following
// live writers.
func runVirtual(ctx context.Context, o Options, p *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "virtual")
	if err != nil {
		return err
	}
	defer cleanup()
	side := o.size(256, 256, 16)
	total := o.size(1024, 512, 16) // frames of the whole, every N
	base := VirtualIngestConfig{Dir: dir, Height: side, Width: side, CacheBytes: 32 << 20,
		Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(1)}}
	frameBytes := int64(2 * side * side)
	ingestPasses := o.size(5, 5, 1)

	// (a) Ingest. The N writer processes share the one-file process's
	// memory: a cache of 32 MiB / N each, so that both sides hold the same
	// bytes (with 32 MiB each, every writer faulted in a cache as large as
	// the one process's, and that, not the writing, was the difference).
	var readSet *VirtualIngestResult
	for _, n := range []int{1, 2, 4} {
		cfg := base
		cfg.Name, cfg.Writers, cfg.Frames = fmt.Sprintf("p%d", n), n, total/n
		procsCfg := cfg
		procsCfg.CacheBytes = cfg.CacheBytes / int64(n)
		var procs, one, procsCPU, oneCPU []time.Duration
		for pass := 0; pass < ingestPasses; pass++ {
			res, err := VirtualIngest(ctx, procsCfg)
			if err != nil {
				return err
			}
			procs, procsCPU = append(procs, res.WriteTime), append(procsCPU, res.WriteCPU)
			onePath := filepath.Join(dir, fmt.Sprintf("one%d.scc", n))
			t, err := IngestOneProcess(ctx, onePath, cfg)
			if err != nil {
				return err
			}
			os.Remove(onePath)
			one, oneCPU = append(one, t.Wall), append(oneCPU, t.CPU)
			if n == 4 && pass == ingestPasses-1 {
				readSet = res
			} else {
				for _, p := range append([]string{res.VirtualPath}, res.SourcePaths...) {
					os.Remove(p)
				}
			}
		}
		bytes := int64(total) * frameBytes
		procsMBps, oneMBps := mibps(bytes, Quantile(procs, 0.5)), mibps(bytes, Quantile(one, 0.5))
		cpuNote := fmt.Sprintf("CPU time (user+system, start-up included), median: %s %.3f s, one process %.3f s",
			plural(n, "writer process"), Quantile(procsCPU, 0.5).Seconds(), Quantile(oneCPU, 0.5).Seconds())
		o.logf("   %s: %.1f MiB/s; one process, %s: %.1f MiB/s; %s", plural(n, "writer process"), procsMBps, plural(n, "goroutine"), oneMBps, cpuNote)
		r.add(Figure{Scenario: "virtual", Key: fmt.Sprintf("ingest-p%d", n), Unit: "MiB/s", HigherIsBetter: true,
			Metric: fmt.Sprintf("ingest, %s → %s + a virtual dataset (aggregate)", plural(n, "writer process"), plural(n, "file")),
			SCC:    procsMBps, Peer: fmt.Sprintf("1 process, %s, one file", plural(n, "goroutine")), PeerValue: ptr(oneMBps),
			Note: fmt.Sprintf("%d MiB of shuffle+deflate-1 frames; both sides run in processes started anew, timed from the start of the writes "+
				"to the last close (final Flush included), start-up excluded; the writer processes have a 32 MiB cache between them "+
				"(32/N MiB each), the one-file process one of 32 MiB; median of %d passes, the sides taking turns; %s",
				bytes>>20, ingestPasses, cpuNote)})
	}

	// (b) Reads of the whole: through the virtual dataset, and the same
	// frames from the sources directly; each pass opens its files with a
	// fresh cache, after one untimed pass that leaves them in the page
	// cache. Every frame is checked in an untimed pass first.
	if _, err := ReadVirtual(ctx, readSet.VirtualPath, 4, virtualReadCache, true); err != nil {
		return err
	}
	if _, err := ReadSources(ctx, readSet.SourcePaths, 4, virtualReadCache, true); err != nil {
		return err
	}
	passes := o.size(5, 5, 1)
	readMBps := map[int][2]float64{}
	for _, g := range []int{1, 4} {
		var tv, ts []time.Duration
		for i := 0; i < passes; i++ {
			t0 := time.Now()
			if _, err := ReadVirtual(ctx, readSet.VirtualPath, g, virtualReadCache, false); err != nil {
				return err
			}
			tv = append(tv, time.Since(t0))
			t0 = time.Now()
			if _, err := ReadSources(ctx, readSet.SourcePaths, g, virtualReadCache, false); err != nil {
				return err
			}
			ts = append(ts, time.Since(t0))
		}
		bytes := int64(total) * frameBytes
		v, s := mibps(bytes, Quantile(tv, 0.5)), mibps(bytes, Quantile(ts, 0.5))
		readMBps[g] = [2]float64{v, s}
		o.logf("   read, %s: virtual %.1f MiB/s, sources directly %.1f MiB/s", plural(g, "goroutine"), v, s)
		r.add(Figure{Scenario: "virtual", Key: fmt.Sprintf("read-g%d", g), Unit: "MiB/s", HigherIsBetter: true,
			Metric: fmt.Sprintf("read the whole virtual dataset (4 sources), %s", plural(g, "goroutine")),
			SCC:    v, Peer: "the same frames read from the sources directly", PeerValue: ptr(s),
			Target: &Target{Kind: "ratio", Value: 0.9},
			Note:   fmt.Sprintf("median of %d passes, each opening the files with a fresh %s cache; the files are in the page cache", passes, HumanBytes(virtualReadCache))})
	}
	h5 := &virtualPeerResult{}
	switch {
	case p.Python == "":
		r.missing("python3 with numpy (needed by h5py and zarr peers)")
		h5 = nil
	case p.H5py == "":
		r.missing("h5py (python3-h5py)")
		h5 = nil
	default:
		bin := filepath.Join(dir, "frames.bin")
		if err := writeVirtualFrames(bin, total, side); err != nil {
			return err
		}
		if err := runScript(ctx, p, dir, "virtual_peer.py", h5, bin, fmt.Sprint(4), fmt.Sprint(total/4),
			fmt.Sprint(side), fmt.Sprint(side), fmt.Sprint(passes), filepath.Join(dir, "h5")); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("virtual: peer h5py: %v", err))
			h5 = nil
		} else if !h5.Verified {
			r.Errors = append(r.Errors, "virtual: peer h5py: its virtual dataset did not read back the frames written")
			h5 = nil
		} else {
			o.logf("   h5py %s: %.1f MiB/s", h5.Version, h5.ReadMBps)
		}
	}
	for _, g := range []int{1, 4} {
		f := Figure{Scenario: "virtual", Key: fmt.Sprintf("h5py-read-g%d", g), Unit: "MiB/s", HigherIsBetter: true,
			Metric: fmt.Sprintf("read the whole virtual dataset (4 sources), %s", plural(g, "goroutine")),
			SCC:    readMBps[g][0], Peer: "h5py",
			Note: "h5py reads an HDF5 virtual dataset (h5py.VirtualLayout, the same strided mappings) over HDF5 copies of the sources " +
				"(chunks of one frame, shuffle+gzip-1) in one thread, the whole dataset in one read, median of the same number of passes, each opening the file anew"}
		if h5 != nil {
			f.Peer, f.PeerValue = "h5py "+h5.Version+" (1 thread)", ptr(h5.ReadMBps)
		}
		r.add(f)
	}

	// (c) Following live writers.
	cfg := base
	cfg.Name, cfg.Writers, cfg.Frames = "follow", 4, o.size(200, 50, 5)
	cfg.FlushEvery, cfg.Interval = 1, 20*time.Millisecond
	const poll = 10 * time.Millisecond
	fr, err := FollowVirtual(ctx, cfg, poll)
	if err != nil {
		return err
	}
	p50, p99 := Quantile(fr.Latencies, 0.5), Quantile(fr.Latencies, 0.99)
	o.logf("   follow: %d frames, latency median %v, p99 %v", fr.Frames, p50, p99)
	note := fmt.Sprintf("4 writer processes each append a frame every %v and Flush it; one reader polls the virtual dataset every %v (Refresh, then read each new frame and check it); latency from the Flush returning in the writer to the frame read, %d frames", cfg.Interval, poll, fr.Frames)
	for _, q := range []struct {
		key, name string
		v         time.Duration
	}{{"follow-p50", "median", p50}, {"follow-p99", "p99", p99}} {
		r.add(Figure{Scenario: "virtual", Key: q.key, Unit: "ms", Metric: "follow 4 live writer processes: Flush → readable, " + q.name,
			SCC: float64(q.v) / float64(time.Millisecond), Note: note})
	}
	return nil
}

func plural(n int, word string) string {
	switch {
	case n == 1:
		return "1 " + word
	case strings.HasSuffix(word, "s"):
		return fmt.Sprintf("%d %ses", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// virtualPeerResult is what virtual_peer.py prints.
type virtualPeerResult struct {
	Version  string  `json:"version"`
	ReadMBps float64 `json:"read_mibps"`
	Verified bool    `json:"verified"`
}

// writeVirtualFrames writes the whole's frames, in frame order, raw, for
// the Python peer: the same bytes the writers wrote.
func writeVirtualFrames(path string, total, side int) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	buf := make([]byte, 2*side*side)
	for g := 0; g < total; g++ {
		FillFrame(buf, 0, g)
		if _, err := w.Write(buf); err != nil {
			fh.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
