package zarrmap

import (
	"context"

	"github.com/scc-dev/scc/engine"
)

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
