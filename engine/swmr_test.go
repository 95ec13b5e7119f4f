package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The single-writer/many-readers test runs the test binary again as a writer
// process and as reader processes; TestMain dispatches on SCC_SWMR_ROLE.
func TestMain(m *testing.M) {
	switch os.Getenv("SCC_SWMR_ROLE") {
	case "writer":
		os.Exit(swmrWriter(os.Getenv("SCC_SWMR_PATH")))
	case "reader":
		os.Exit(swmrReader(os.Getenv("SCC_SWMR_PATH")))
	case "vds-writer":
		os.Exit(vdsWriter(os.Getenv("SCC_SWMR_PATH")))
	}
	os.Exit(m.Run())
}

const (
	swmrFrames = 60
	swmrSide   = 16
)

// swmrFrame is frame n: every element derived from n, the first holding n
// and the last a CRC32 of all the others, so a reader can tell a frame from
// any other frame and from garbage.
func swmrFrame(n uint64) []byte {
	b := make([]byte, swmrSide*swmrSide*4)
	binary.LittleEndian.PutUint32(b, uint32(n))
	for i := 1; i < swmrSide*swmrSide-1; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(n*2654435761+uint64(i)*40503))
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

func swmrWriter(path string) int {
	ctx := context.Background()
	f, err := Create(ctx, path, nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ds, err := f.CreateDataset(ctx, "frames", DatasetSpec{
		Type: Uint32, Shape: []uint64{0, swmrSide, swmrSide}, MaxShape: []uint64{Unlimited, swmrSide, swmrSide},
		Chunk: []uint64{1, swmrSide, swmrSide}, Filters: []Filter{Shuffle(), Zstd(1)},
	})
	if err == nil {
		err = f.Flush(ctx)
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	for n := uint64(0); n < swmrFrames; n++ {
		if err := ds.SetExtent(ctx, []uint64{n + 1, swmrSide, swmrSide}); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if err := ds.Write(ctx, Box([]uint64{n, 0, 0}, []uint64{1, swmrSide, swmrSide}), swmrFrame(n)); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if err := f.Flush(ctx); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	if err := f.Close(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

func swmrReader(path string) int {
	ctx := context.Background()
	f, err := Open(ctx, path, &Options{ReadOnly: true})
	if err != nil {
		fmt.Println("error open:", err)
		return 1
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "frames", nil)
	if err != nil {
		fmt.Println("error open dataset:", err)
		return 1
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	buf := make([]byte, swmrSide*swmrSide*4)
	deadline := time.Now().Add(2 * time.Minute)
	reads, refreshes := 0, 0
	var seen uint64
	for seen < swmrFrames {
		if time.Now().After(deadline) {
			fmt.Println("error: writer never finished; saw", seen)
			return 1
		}
		if err := ds.Refresh(ctx); err != nil {
			fmt.Println("error refresh:", err)
			return 1
		}
		refreshes++
		n := ds.Shape()[0]
		if n < seen {
			fmt.Printf("error: extent went back from %d to %d\n", seen, n)
			return 1
		}
		seen = n
		if n == 0 {
			continue
		}
		for _, k := range []uint64{n - 1, rng.Uint64N(n)} {
			if err := ds.Read(ctx, Box([]uint64{k, 0, 0}, []uint64{1, swmrSide, swmrSide}), buf); err != nil {
				fmt.Printf("error read frame %d of %d: %v\n", k, n, err)
				return 1
			}
			if !bytes.Equal(buf, swmrFrame(k)) {
				fmt.Printf("error: frame %d of %d holds wrong data (first element %d)\n", k, n, binary.LittleEndian.Uint32(buf))
				return 1
			}
			reads++
		}
	}
	fmt.Printf("ok reads=%d refreshes=%d\n", reads, refreshes)
	return 0
}

// TestSWMRProcesses: a writer process appends and flushes frames while
// reader processes poll, refresh and read. A reader must never get an error
// nor wrong data, and must see the extent only grow.
func TestSWMRProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	path := filepath.Join(t.TempDir(), "swmr.scc")
	tCheckPath(t, path) // what the writer process leaves
	cmd := func(role string) *exec.Cmd {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "SCC_SWMR_ROLE="+role, "SCC_SWMR_PATH="+path)
		return c
	}
	w := cmd("writer")
	out, err := w.StdoutPipe()
	must(t, err)
	w.Stderr = os.Stderr
	must(t, w.Start())
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		w.Process.Kill()
		w.Wait()
		t.Fatalf("writer did not start: %q", sc.Text())
	}
	var readers []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < 2; i++ {
		r := cmd("reader")
		var b bytes.Buffer
		r.Stdout, r.Stderr = &b, &b
		must(t, r.Start())
		readers, outs = append(readers, r), append(outs, &b)
	}
	rest, _ := io.ReadAll(out)
	werr := w.Wait()
	for i, r := range readers {
		if err := r.Wait(); err != nil {
			t.Errorf("reader %d: %v\n%s", i, err, outs[i])
		} else {
			t.Logf("reader %d: %s", i, strings.TrimSpace(outs[i].String()))
		}
	}
	if werr != nil || !strings.Contains(string(rest), "done") {
		t.Fatalf("writer: %v\n%s", werr, rest)
	}
}
