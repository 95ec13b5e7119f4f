package cache_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// Two files share one cache and so one memory budget: each file's data
// fits the budget alone, both together do not, and the shared cache evicts
// to stay within it while serving both.
func ExampleNew_sharedByTwoFiles() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "scc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// 64 KiB of chunks per file; the budget holds 96 KiB, and the active
	// multiplier of 1 keeps requests to it too.
	const rows, cols = 16, 1024 // uint32: 4 KiB a row, one row a chunk
	spec := engine.DatasetSpec{
		Type: engine.Uint32, Shape: []uint64{rows, cols}, Chunk: []uint64{1, cols},
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)},
	}
	paths := []string{filepath.Join(dir, "a.scc"), filepath.Join(dir, "b.scc")}
	for i, p := range paths {
		f, err := engine.Create(ctx, p, nil)
		if err != nil {
			log.Fatal(err)
		}
		ds, err := f.CreateDataset(ctx, "d", spec)
		if err != nil {
			log.Fatal(err)
		}
		vals := make([]uint32, rows*cols)
		for j := range vals {
			vals[j] = uint32(i*1_000_000 + j)
		}
		if err := engine.WriteSlice(ctx, ds, engine.All(spec.Shape), vals); err != nil {
			log.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			log.Fatal(err)
		}
	}

	c, err := cache.New(cache.Config{QuiescentBytes: 96 << 10, ActiveMultiplier: 1, MinBytes: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var sets []*engine.Dataset
	for _, p := range paths {
		f, err := engine.Open(ctx, p, &engine.Options{Cache: c, ReadOnly: true})
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close(ctx)
		ds, err := f.OpenDataset(ctx, "d", nil)
		if err != nil {
			log.Fatal(err)
		}
		sets = append(sets, ds)
	}
	// Read both files row by row, alternating between them, twice. The
	// first pass fills the cache and serves the rows past its budget
	// without keeping them (a scan evicts nothing); rows read again are
	// kept, evicting others.
	row := make([]uint32, cols)
	sums := make([]uint64, len(sets))
	for range 2 {
		for r := uint64(0); r < rows; r++ {
			for i, ds := range sets {
				if err := engine.ReadSlice(ctx, ds, engine.Box([]uint64{r, 0}, []uint64{1, cols}), row); err != nil {
					log.Fatal(err)
				}
				for _, v := range row {
					sums[i] += uint64(v)
				}
			}
		}
	}
	st := c.Stats()
	fmt.Println("sums:", sums)
	fmt.Println("datasets in the cache:", st.Datasets)
	fmt.Println("evicted to make room:", st.Evictions > 0)
	fmt.Println("within the budget:", st.PeakResidentBytes <= 96<<10)
	// Output:
	// sums: [268419072 33036419072]
	// datasets in the cache: 2
	// evicted to make room: true
	// within the budget: true
}
