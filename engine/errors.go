package engine

import (
	"errors"
	"fmt"

	"github.com/scc-dev/scc/engine/alloc"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/format"
	"github.com/scc-dev/scc/engine/index"
	"github.com/scc-dev/scc/engine/selection"
	"github.com/scc-dev/scc/vfd"
)

// The package's error sentinels. Every error the engine returns that falls in
// one of these classes matches it with errors.Is, whichever layer found it.
var (
	ErrNotFound   = errors.New("scc: not found")
	ErrExists     = errors.New("scc: already exists")
	ErrClosed     = errors.New("scc: closed")
	ErrReadOnly   = errors.New("scc: file is read-only")
	ErrCorrupt    = errors.New("scc: corrupt data")
	ErrOutOfRange = errors.New("scc: out of range")
	ErrInvalid    = errors.New("scc: invalid argument")
	// ErrLocked: the file is open for writing elsewhere (another process,
	// or another File in this one).
	ErrLocked = vfd.ErrLocked
)

// classify makes an error from a lower layer match the engine's sentinel for
// its class, keeping the original in the chain for detail.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	switch {
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrInvalid), errors.Is(err, ErrOutOfRange),
		errors.Is(err, ErrClosed), errors.Is(err, ErrNotFound), errors.Is(err, ErrExists),
		errors.Is(err, ErrReadOnly):
		return err
	case errors.Is(err, format.ErrCorrupt), errors.Is(err, format.ErrVersion),
		errors.Is(err, filter.ErrCorrupt), errors.Is(err, index.ErrCorrupt),
		errors.Is(err, alloc.ErrOverlap):
		sentinel = ErrCorrupt
	case errors.Is(err, selection.ErrOutOfRange), errors.Is(err, index.ErrOutOfRange):
		sentinel = ErrOutOfRange
	case errors.Is(err, selection.ErrInvalid), errors.Is(err, filter.ErrInvalid),
		errors.Is(err, index.ErrGeometry), errors.Is(err, index.ErrConfig):
		sentinel = ErrInvalid
	case errors.Is(err, vfd.ErrClosed):
		sentinel = ErrClosed
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
