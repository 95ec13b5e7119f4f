package cache

import (
	"context"

	"github.com/scc-dev/scc/cache/layout"
)

// DirectLocate returns where the chunk's stored image is, as DirectRead
// would read it (a dirty cached copy is written back first), without
// reading it: for a caller that reads part of the image itself (one inner
// chunk of a sharded chunk). Location.Size == 0 means the chunk is not
// stored.
func (d *Dataset) DirectLocate(ctx context.Context, coord layout.Coord) (layout.Location, error) {
	c := d.c
	if err := c.begin(); err != nil {
		return layout.Location{}, err
	}
	defer c.end()
	if err := d.writeBackOne(ctx, coord); err != nil {
		return layout.Location{}, err
	}
	locs := make([]layout.Location, 1)
	if err := d.lay().l.Lookup(ctx, []layout.Coord{coord}, locs); err != nil {
		return layout.Location{}, err
	}
	return locs[0], nil
}
