package zarrmap

import (
	"context"
	"sort"

	"github.com/scc-dev/scc/engine"
)

// DatasetNames lists the paths of every dataset of f without the leading
// '/', sorted: the names a view or an export maps onto Zarr keys.
func DatasetNames(f *engine.File) ([]string, error) {
	var names []string
	for m, err := range f.Datasets() {
		if err != nil {
			return nil, err
		}
		names = append(names, m.Path[1:])
	}
	sort.Strings(names)
	return names, nil
}

// Chunks collects ds.Chunks: the dataset's stored chunks in C order.
func Chunks(ctx context.Context, ds *engine.Dataset) ([]engine.StoredChunk, error) {
	var out []engine.StoredChunk
	for c, err := range ds.Chunks(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
