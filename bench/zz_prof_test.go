package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/scc-dev/scc/engine"
)

func TestZZProf(t *testing.T) {
	dir := os.Getenv("ZZDIR")
	if dir == "" {
		t.Skip()
	}
	c := ZarrBenchConfig{Side: 256, Chunk: 64}
	if os.Getenv("ZZFULL") != "" {
		c = ZarrBenchConfig{Side: 1024, Chunk: 256}
	}
	rmp := ramp(c.Side)
	ctx := context.Background()
	codec := os.Getenv("ZZCODEC")
	path := filepath.Join(dir, "a_"+codec+strconv.Itoa(c.Side)+".scc")
	var filters []engine.Filter
	if codec == "zstd" {
		filters = []engine.Filter{engine.Zstd(3)}
	}
	if _, err := os.Stat(path); err != nil {
		if err := writeZarrBenchFile(ctx, path, c, filters, rmp); err != nil {
			t.Fatal(err)
		}
	}
	row := os.Getenv("ZZROW")
	conc, _ := strconv.Atoi(os.Getenv("ZZCONC"))
	n, _ := strconv.Atoi(os.Getenv("ZZN"))
	for i := 0; i < n; i++ {
		os.Remove(filepath.Join(dir, "out.scc"))
		res, err := sccZarrRow(ctx, path, row, conc, c, rmp, filepath.Join(dir, "out.scc"), filters)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s c%d: %.4f s cpu %.4f rss %d", row, conc, res.Seconds, res.CPUSeconds, res.PeakRSS>>20)
	}
}
