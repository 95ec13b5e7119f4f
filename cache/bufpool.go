package cache

import (
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
)

// The cache's buffers come from the module's buffer pool (internal/bufpool),
// whose ownership rule says which part owns a buffer when.

// releaseImage returns an encoded image the cache owns (written, or never
// to be written) to the pool if the layout took it from there.
func releaseImage(enc layout.Encoded) {
	if enc.Pooled {
		bufpool.Put(enc.Image)
	}
}
