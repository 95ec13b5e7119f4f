package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/pool"
	"github.com/scc-dev/scc/resource"
	"github.com/scc-dev/scc/serialize"
	"github.com/scc-dev/scc/vfd"
)

// The package's error sentinels. Every error the engine returns matches
// exactly one of them with errors.Is, whichever layer found it, and keeps
// its cause in the chain (an I/O error still matches syscall.EIO). The one
// exception is a cancelled or expired context: those errors are returned as
// ctx.Err() produced them (context.Canceled, context.DeadlineExceeded), as
// database/sql does.
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
	// ErrIO: the driver failed (the operating system's error, or an
	// injected one, is in the chain). Never a sign of damage by itself.
	ErrIO = errors.New("scc: I/O error")
	// ErrStale: a read-only File fell behind its writer, which reused space
	// the File's committed state still named, and the retries did not
	// catch up. Nothing is damaged: Refresh and retry.
	ErrStale = errors.New("scc: stale view of a file its writer changed; refresh and retry")
	// ErrInternal: a bug in scc or in a layout callback (a panic the worker
	// pool caught). The call failed; the file's committed state is intact.
	ErrInternal = errors.New("scc: internal error")
	// ErrVersion: the file (or one of its blocks) is intact but written in
	// a format version newer than this scc reads. Nothing is damaged: open
	// it with a newer scc. Distinct from ErrCorrupt so that a user never
	// takes a newer file for a broken one.
	ErrVersion = errors.New("scc: file format version newer than this scc reads")
	// ErrDenied: the storage refused access (a file's permissions, an
	// object store's credentials or policy: fs.ErrPermission in the
	// chain). Not damage, and not a transient I/O failure.
	ErrDenied = errors.New("scc: permission denied")
	// ErrDeleted: the dataset this handle opened was deleted (File.Delete,
	// or by the writer a read-only File follows). The handle serves
	// nothing more; close it.
	ErrDeleted = errors.New("scc: dataset deleted")
)

// sentinels lists the engine's sentinels, for classify and its tests.
var sentinels = []error{ErrNotFound, ErrExists, ErrClosed, ErrReadOnly, ErrCorrupt,
	ErrOutOfRange, ErrInvalid, ErrLocked, ErrIO, ErrStale, ErrInternal, ErrVersion, ErrDenied, ErrDeleted}

// classify makes an error from a lower layer match the engine's sentinel for
// its class, keeping the original in the chain for detail. Errors that
// already match an engine sentinel, and context errors, pass unchanged;
// anything else not named here is an I/O error of the driver.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return err
		}
	}
	var sentinel error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, format.ErrVersion), errors.Is(err, filter.ErrUnknown):
		sentinel = ErrVersion
	case errors.Is(err, format.ErrCorrupt),
		errors.Is(err, filter.ErrCorrupt), errors.Is(err, index.ErrCorrupt),
		errors.Is(err, alloc.ErrOverlap):
		sentinel = ErrCorrupt
	case errors.Is(err, selection.ErrOutOfRange), errors.Is(err, index.ErrOutOfRange):
		sentinel = ErrOutOfRange
	case errors.Is(err, selection.ErrInvalid), errors.Is(err, filter.ErrInvalid),
		errors.Is(err, index.ErrGeometry), errors.Is(err, index.ErrConfig),
		errors.Is(err, format.ErrInvalid), errors.Is(err, vfd.ErrInvalid),
		errors.Is(err, cache.ErrInvalid), errors.Is(err, cache.ErrInvalidConfig),
		errors.Is(err, serialize.ErrInvalid), errors.Is(err, resource.ErrInvalid),
		errors.Is(err, pool.ErrInvalid), errors.Is(err, cache.ErrFilesOpen):
		sentinel = ErrInvalid
	case errors.Is(err, vfd.ErrClosed), errors.Is(err, cache.ErrClosed),
		errors.Is(err, cache.ErrNotRegistered), errors.Is(err, pool.ErrClosed):
		sentinel = ErrClosed
	case errors.Is(err, cache.ErrExists):
		sentinel = ErrExists
	case errors.Is(err, cache.ErrPanic), errors.Is(err, pool.ErrPanic), errors.Is(err, pool.ErrGoexit),
		errors.Is(err, cache.ErrInUse):
		sentinel = ErrInternal
	case errors.Is(err, io.ErrUnexpectedEOF):
		sentinel = ErrCorrupt
	// Drivers over remote storage (vfd/s3) report a missing object or a
	// refused request with the standard library's markers, so the engine
	// tells them apart without importing the driver.
	case errors.Is(err, fs.ErrNotExist):
		sentinel = ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		sentinel = ErrDenied
	default:
		// vfd.ErrInjected, io.ErrShortWrite, syscall errors, pool.ErrFull
		// (a write-back that could not be queued) ...
		sentinel = ErrIO
	}
	return classed(sentinel, err, "")
}

// classifyIn is classify for an error about a request on a dataset: the
// text names the dataset after the class ("scc: out of range: dataset
// "g/d": dimension 0: ..."), so that a caller working on several can tell
// which refused it.
func classifyIn(err error, dataset string) error {
	if err == nil {
		return nil
	}
	return within(classify(err), fmt.Sprintf("dataset %q", dataset))
}

// within names where an error of an engine class happened, after its
// class: "scc: out of range: element 3: ...".
func within(err error, where string) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return classed(s, err, where)
		}
	}
	return fmt.Errorf("%s: %w", where, err)
}

// classError is an error of one engine class whose text says the class
// once. A lower layer's error starts with its own sentinel's text
// ("selection: out of range: ..."), which after the engine's ("scc: out
// of range: ") would say the same thing twice; the text drops it, and
// Unwrap keeps both sentinels in the chain for errors.Is.
type classError struct {
	msg  string
	errs [2]error // the engine sentinel, the wrapped error
}

func (e *classError) Error() string   { return e.msg }
func (e *classError) Unwrap() []error { return e.errs[:] }

// lowerPrefixes are the lower layers' sentinels whose text repeats an
// engine class, and what replaces it in the text (the package, where
// that says where the damage is).
var lowerPrefixes = []struct {
	err  error
	with string
}{
	{selection.ErrOutOfRange, ""},
	{selection.ErrInvalid, ""},
	{format.ErrCorrupt, ""},
	{format.ErrInvalid, ""},
	{format.ErrVersion, ""},
	{index.ErrCorrupt, "index: "},
	{index.ErrOutOfRange, "index: "},
	{filter.ErrCorrupt, "filter: "},
	{filter.ErrInvalid, "filter: "},
}

// classed wraps err (of a lower layer, or sentinel itself, or an error
// already wrapping sentinel) in sentinel's class; where, when set, is
// named after the class.
func classed(sentinel, err error, where string) error {
	msg := err.Error()
	if p := sentinel.Error() + ": "; strings.HasPrefix(msg, p) {
		msg = msg[len(p):]
	} else if msg == sentinel.Error() {
		msg = ""
	}
	for _, l := range lowerPrefixes {
		if p := l.err.Error() + ": "; strings.HasPrefix(msg, p) && errors.Is(err, l.err) {
			msg = l.with + msg[len(p):]
			break
		}
	}
	text := sentinel.Error()
	if where != "" {
		text += ": " + where
	}
	if msg != "" {
		text += ": " + msg
	}
	return &classError{msg: text, errs: [2]error{sentinel, err}}
}
