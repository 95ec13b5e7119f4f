package s3_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd/s3"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// vWriterEnv names the environment variable that makes this test binary
// a writer process of TestVirtualWriterProcessesS3 (TestMain).
const vWriterEnv = "SCC_S3_VWRITER"

const vpSide = 8

// vWriterMain is one writer process: writer i of n appends global frames
// i, i+n, i+2n, ... to its own file on the test server (the URL, the
// endpoint and the counts come in the environment), flushing at random
// moments and printing "ack J" after each Flush that made its first J
// frames durable. It prints "ready" once the file holds its first commit,
// then waits for a line on stdin before writing. The victim (SCC_VDS_HOLD)
// never exits by itself, so the kill always finds it running.
func vWriterMain() int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " ")); return 1 }
	i, _ := strconv.Atoi(os.Getenv("SCC_VDS_INDEX"))
	n, _ := strconv.Atoi(os.Getenv("SCC_VDS_WRITERS"))
	frames, _ := strconv.Atoi(os.Getenv("SCC_VDS_FRAMES"))
	d, err := s3.Open(ctx, os.Getenv(vWriterEnv), &s3.Options{Endpoint: os.Getenv("SCC_S3_ENDPOINT"), Insecure: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, RetryBase: time.Millisecond, Create: true, PageSize: 64 << 10})
	if err != nil {
		return fail(err)
	}
	f, err := engine.Create(ctx, "", &engine.Options{Driver: d})
	if err != nil {
		return fail(err)
	}
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{0, vpSide, vpSide},
		MaxShape: []uint64{engine.Unlimited, vpSide, vpSide}, Chunk: []uint64{1, vpSide, vpSide},
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}})
	if err == nil {
		err = f.Flush(ctx)
	}
	if err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return fail(fmt.Errorf("waiting for the start: %w", err))
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(i)))
	for j := 0; j < frames; j++ {
		if err := ds.SetExtent(ctx, []uint64{uint64(j + 1), vpSide, vpSide}); err != nil {
			return fail(err)
		}
		g := uint64(j*n + i)
		if err := ds.Write(ctx, engine.Box([]uint64{uint64(j), 0, 0}, []uint64{1, vpSide, vpSide}), vFrame(g, vpSide*vpSide)); err != nil {
			return fail(err)
		}
		if rng.IntN(3) == 0 || j == frames-1 {
			if err := f.Flush(ctx); err != nil {
				return fail(err)
			}
			fmt.Println("ack", j+1)
		}
	}
	if os.Getenv("SCC_VDS_HOLD") != "" {
		_, _ = in.ReadString('\n')
		return 1
	}
	if err := f.Close(ctx); err != nil {
		return fail(err)
	}
	fmt.Println("done")
	return 0
}

// TestVirtualWriterProcessesS3: four writer processes append frames
// round-robin, each to its own file on the S3 server, flushing at random
// moments; this process follows the virtual dataset over them (itself on
// the server, its s3:// sources opened through VirtualOptions.Open) and
// checks every frame it sees against what the writers had acknowledged.
// One writer is killed with SIGKILL mid-run: afterwards the virtual
// dataset holds every frame that writer's last acknowledged Flush made
// durable and the fill value (or frames it committed without getting to
// say so) past them, and its file, like the others, passes the checker.
// SCC_STRESS=long runs it longer.
func TestVirtualWriterProcessesS3(t *testing.T) {
	ctx := context.Background()
	const nw, victim = 4, 1
	const elems = vpSide * vpSide
	frames := 24
	if os.Getenv("SCC_STRESS") == "long" {
		frames = 150
	}
	prefix := s3.TestKey(t)
	url := func(name string) string { return "s3://" + s3.TestBucket + "/" + prefix + "/" + name }
	var maps []engine.VirtualMapping
	for i := 0; i < nw; i++ {
		maps = append(maps, engine.VirtualMapping{
			Virtual: engine.Hyperslab([]uint64{uint64(i), 0, 0}, []uint64{nw, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, vpSide, vpSide}),
			File:    url(fmt.Sprintf("w%d.scc", i)),
			Dataset: "frames",
			Source:  engine.Hyperslab([]uint64{0, 0, 0}, nil, []uint64{engine.Unlimited, 1, 1}, []uint64{1, vpSide, vpSide}),
		})
	}
	vf, err := engine.Create(ctx, "", &engine.Options{Driver: mustDrv(t, prefix+"/v.scc", "", create), Virtual: engine.VirtualOptions{Open: openS3Source}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vf.CreateVirtualDataset(ctx, "v", engine.VirtualSpec{Type: engine.Uint32, Shape: []uint64{0, vpSide, vpSide},
		MaxShape: []uint64{engine.Unlimited, vpSide, vpSide}, Mappings: maps}); err != nil {
		t.Fatal(err)
	}
	if err := vf.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var acked [nw]atomic.Int64
	var finished [nw]atomic.Bool
	cmds := make([]*exec.Cmd, nw)
	starts := make([]*os.File, 0, nw)
	var wg sync.WaitGroup
	errs := make(chan error, 2*nw+1)
	killed := make(chan struct{})
	ready := make(chan int, nw)
	for i := 0; i < nw; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), vWriterEnv+"="+url(fmt.Sprintf("w%d.scc", i)), "SCC_S3_ENDPOINT="+s3.Server().Endpoint(),
			"SCC_VDS_INDEX="+strconv.Itoa(i), "SCC_VDS_WRITERS="+strconv.Itoa(nw), "SCC_VDS_FRAMES="+strconv.Itoa(frames))
		if i == victim {
			cmd.Env = append(cmd.Env, "SCC_VDS_HOLD=1")
		}
		cmd.Stderr = os.Stderr
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = pr
		starts = append(starts, pw)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		cmds[i] = cmd
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "ack "):
					j, _ := strconv.Atoi(line[4:])
					acked[i].Store(int64(j))
					if i == victim && j >= frames/3 {
						select {
						case <-killed:
						default:
							cmds[i].Process.Signal(syscall.SIGKILL)
							close(killed)
						}
					}
				case line == "done":
					finished[i].Store(true)
				case line == "ready":
					ready <- i
				default:
					errs <- fmt.Errorf("writer %d: %s", i, line)
				}
			}
			err := cmds[i].Wait()
			if i != victim && err != nil {
				errs <- fmt.Errorf("writer %d: %v", i, err)
			}
		}(i)
	}
	defer func() {
		for _, w := range starts {
			w.Close()
		}
		for _, c := range cmds {
			c.Process.Kill()
		}
		wg.Wait()
	}()
	for range nw {
		select {
		case <-ready:
		case err := <-errs:
			t.Fatal(err)
		}
	}

	r, err := engine.Open(ctx, "", &engine.Options{Driver: mustDrv(t, prefix+"/v.scc", "", readOnly), ReadOnly: true, Virtual: engine.VirtualOptions{Open: openS3Source, View: engine.LastAvailable}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	ds, err := r.OpenDataset(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range starts {
		if _, err := w.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
	}
	exited := make(chan struct{})
	go func() { wg.Wait(); close(exited) }()
	var rounds, stale int
	// check reads the whole virtual dataset after a Refresh and holds it
	// to the acknowledgements taken before: acknowledged frames read
	// exactly, others are fill or exactly their frame. ErrStale (a page
	// replaced under the reader) is retried, except at the end.
	check := func(final bool) {
		var ack [nw]int64
		for i := range ack {
			ack[i] = acked[i].Load()
		}
		err := ds.Refresh(ctx)
		var n uint64
		var buf []byte
		if err == nil {
			n = ds.Shape()[0]
			buf = make([]byte, n*elems*4)
			err = ds.Read(ctx, engine.Box([]uint64{0, 0, 0}, []uint64{n, vpSide, vpSide}), buf)
		}
		if errors.Is(err, engine.ErrStale) && !final {
			stale++
			return
		}
		if err != nil {
			t.Fatalf("round %d: %v", rounds, err)
		}
		for i := 0; i < nw; i++ {
			if ack[i] > 0 && n < uint64(i)+uint64(nw)*uint64(ack[i]-1)+1 {
				t.Fatalf("extent %d hides frames writer %d acknowledged (%d)", n, i, ack[i])
			}
		}
		zero := make([]byte, elems*4)
		for g := uint64(0); g < n; g++ {
			i, j := g%nw, int64(g/nw)
			got := buf[g*elems*4 : (g+1)*elems*4]
			data := string(got) == string(vFrame(g, elems))
			if !data && (j < ack[i] || string(got) != string(zero)) {
				t.Fatalf("round %d: frame %d (writer %d frame %d, %d acknowledged) is neither its data nor, unacknowledged, fill", rounds, g, i, j, ack[i])
			}
		}
		rounds++
	}
	for done := false; !done; {
		select {
		case <-exited:
			done = true
		default:
			check(false)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case <-killed:
	default:
		t.Fatal("the victim was never killed")
	}
	for i := 0; i < nw; i++ {
		if i != victim && !finished[i].Load() {
			t.Fatalf("writer %d did not finish", i)
		}
		rep, err := engine.Check(ctx, "", &engine.Options{Driver: mustDrv(t, fmt.Sprintf("%s/w%d.scc", prefix, i), "", readOnly)})
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("writer %d's file after the run: %v %v", i, err, rep.Problems)
		}
	}
	check(true)
	if n := ds.Shape()[0]; n != uint64(nw*frames) {
		t.Fatalf("final extent %d, want %d (the other writers' frames)", n, nw*frames)
	}
	t.Logf("%d rounds, %d stale retries; the victim acknowledged %d of %d frames", rounds, stale, acked[victim].Load(), frames)
}

func init() {
	s3.ChildMain = func() (int, bool) {
		if os.Getenv(vWriterEnv) == "" {
			return 0, false
		}
		return vWriterMain(), true
	}
}
