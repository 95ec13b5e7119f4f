package zarr

import "github.com/scc-dev/scc/internal/zarrmap"

// The package's tests name the export's mapping as they did before it
// moved to internal/zarrmap.

const typesKey = zarrmap.TypesKey

var (
	chunkBox     = zarrmap.ChunkBox
	rewrap       = zarrmap.Rewrap
	virtualChunk = zarrmap.VirtualChunk
	nameErr      = zarrmap.NameErr
)

// encode applies the stage to src, as an export writes it.
func (c codec) encode(src []byte) ([]byte, error) { return c.shared().Encode(src) }
