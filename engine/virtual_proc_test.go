package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

const vdsSide = 8

// vdsWriter is one writer process of TestVirtualWriterProcesses: writer i
// of n appends global frames i, i+n, i+2n, ... to its own file, flushing
// at random moments and printing "ack J" after each Flush that made its
// first J frames durable. The file is made under another name and renamed
// once it holds its first commit, so a reader never opens a file without
// one.
func vdsWriter(path string) int {
	ctx := context.Background()
	i, _ := strconv.Atoi(os.Getenv("SCC_VDS_INDEX"))
	n, _ := strconv.Atoi(os.Getenv("SCC_VDS_WRITERS"))
	frames, _ := strconv.Atoi(os.Getenv("SCC_VDS_FRAMES"))
	fail := func(err error) int { fmt.Println("error", err); return 1 }
	f, err := Create(ctx, path+".tmp", &Options{NoSync: true})
	if err != nil {
		return fail(err)
	}
	ds, err := f.CreateDataset(ctx, "frames", DatasetSpec{Type: Uint32, Shape: []uint64{0, vdsSide, vdsSide},
		MaxShape: []uint64{Unlimited, vdsSide, vdsSide}, Chunk: []uint64{1, vdsSide, vdsSide}, Filters: []Filter{Shuffle(), Deflate(1)}})
	if err == nil {
		err = f.Flush(ctx)
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(i)))
	for j := 0; j < frames; j++ {
		if err := ds.SetExtent(ctx, []uint64{uint64(j + 1), vdsSide, vdsSide}); err != nil {
			return fail(err)
		}
		g := uint64(j*n + i)
		if err := WriteSlice(ctx, ds, Box([]uint64{uint64(j), 0, 0}, []uint64{1, vdsSide, vdsSide}), frameData(g, vdsSide*vdsSide)); err != nil {
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
		// The victim: never exits by itself, so the kill always finds it
		// running, writing or, at worst, done writing.
		_, _ = os.Stdin.Read(make([]byte, 1))
		return 1
	}
	if err := f.Close(ctx); err != nil {
		return fail(err)
	}
	fmt.Println("done")
	return 0
}

// TestVirtualWriterProcesses: four writer processes append frames
// round-robin to their own files; this process follows the virtual
// dataset over them, checking every frame it sees against what the
// writers had acknowledged; one writer is killed with SIGKILL mid-run, and
// afterwards the virtual dataset holds every frame that writer's last
// acknowledged Flush made durable, and the fill value (or frames it
// committed without getting to say so) past them.
func TestVirtualWriterProcesses(t *testing.T) {
	ctx := context.Background()
	const nw, victim = 4, 1
	frames := 120
	if testing.Short() {
		frames = 40
	}
	dir := t.TempDir()
	c := vcache(t)
	vpath := filepath.Join(dir, "v.scc")
	vf := tCreatePath(t, vpath, &Options{Cache: c, NoSync: true})
	if _, err := vf.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0, vdsSide, vdsSide},
		MaxShape: []uint64{Unlimited, vdsSide, vdsSide}, Mappings: roundRobin(nw, vdsSide, vdsSide, false)}); err != nil {
		t.Fatal(err)
	}
	if err := vf.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var acked [nw]atomic.Int64
	var finished [nw]atomic.Bool
	cmds := make([]*exec.Cmd, nw)
	var wg sync.WaitGroup
	errs := make(chan error, nw+1)
	killed := make(chan struct{})
	for i := 0; i < nw; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SCC_SWMR_ROLE=vds-writer", "SCC_SWMR_PATH="+filepath.Join(dir, fmt.Sprintf("w%d.scc", i)),
			"SCC_VDS_INDEX="+strconv.Itoa(i), "SCC_VDS_WRITERS="+strconv.Itoa(nw), "SCC_VDS_FRAMES="+strconv.Itoa(frames))
		cmd.Stderr = os.Stderr
		if i == victim {
			cmd.Env = append(cmd.Env, "SCC_VDS_HOLD=1")
			hold, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Close()
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
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
	// Follow until every writer has exited.
	r := tOpenPath(t, vpath, &Options{Cache: c, ReadOnly: true, Virtual: VirtualOptions{View: LastAvailable}})
	defer r.Close(ctx)
	ds, err := r.OpenDataset(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { wg.Wait(); close(exited) }()
	rounds := 0
	check := func(final bool) {
		var ack [nw]int64
		for i := range ack {
			ack[i] = acked[i].Load()
		}
		if err := ds.Refresh(ctx); err != nil {
			if errors.Is(err, ErrStale) && !final {
				return
			}
			t.Fatalf("refresh: %v", err)
		}
		n := ds.Shape()[0]
		buf := make([]uint32, n*vdsSide*vdsSide)
		if n > 0 {
			if err := ReadSlice(ctx, ds, All([]uint64{n, vdsSide, vdsSide}), buf); err != nil {
				if errors.Is(err, ErrStale) && !final {
					return
				}
				t.Fatalf("read: %v", err)
			}
		}
		for i := 0; i < nw; i++ {
			if ack[i] > 0 && n < uint64(i)+uint64(nw)*uint64(ack[i]-1)+1 {
				t.Fatalf("extent %d hides frames writer %d acknowledged (%d)", n, i, ack[i])
			}
		}
		for g := uint64(0); g < n; g++ {
			i, j := g%nw, int64(g/nw)
			frame := buf[g*vdsSide*vdsSide : (g+1)*vdsSide*vdsSide]
			fill := true
			for _, x := range frame {
				fill = fill && x == 0
			}
			if fill && j >= ack[i] {
				continue // not acknowledged: fill, or the frame (below)
			}
			for e, x := range frame {
				if x != frameVal(g, uint64(e)) {
					t.Fatalf("frame %d (writer %d, acked %d) element %d = %#x", g, i, ack[i], e, x)
				}
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
	// Every writer has exited, the victim by SIGKILL: what each left on
	// disk, its last commit, must be consistent.
	for i := 0; i < nw; i++ {
		tCheckPath(t, filepath.Join(dir, fmt.Sprintf("w%d.scc", i)))
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
	}
	check(true)
	if n := ds.Shape()[0]; n != uint64(nw*frames) {
		t.Fatalf("final extent %d, want %d (the other writers' frames)", n, nw*frames)
	}
	t.Logf("%d rounds; the victim acknowledged %d of %d frames", rounds, acked[victim].Load(), frames)
}
