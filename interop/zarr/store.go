package zarr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// A store is a Zarr store on the local file system, read as hostile input:
// every key is resolved component by component inside the root (symlinks
// included, so a link cannot lead a read out of the store unless
// Options.FollowOutsideLinks says so), only regular files are opened (a
// FIFO or a device would block or never end), and every read is bounded
// before its bytes are trusted.
type store struct {
	root    string // absolute, symlinks resolved
	outside bool   // follow symlinks whose target leaves root
}

func openStore(dir string, o Options) (*store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, ioErr(err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, ioErr(err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, ioErr(err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is %s, not a directory", ErrNotRegular, dir, fileKind(fi.Mode()))
	}
	return &store{root: real, outside: o.FollowOutsideLinks}, nil
}

// ioErr gives an operating-system error the engine's I/O sentinel (a
// missing file keeps matching fs.ErrNotExist).
func ioErr(err error) error {
	if err == nil || errors.Is(err, engine.ErrIO) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", engine.ErrIO, err)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a " + m.Type().String() + " file"
}

// joinKey joins key parts with "/", leaving out empty ones (the root).
func joinKey(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "/")
}

// checkKey refuses keys that are not relative paths of plain names.
func checkKey(key string) error {
	if key == "" || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w: key %q", ErrUnsafe, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: key %q has an empty, \".\" or \"..\" segment", ErrUnsafe, key)
		}
	}
	return nil
}

func (s *store) within(p string) bool {
	if s.outside || p == s.root {
		return true
	}
	root := s.root
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(p, root)
}

// maxLinks bounds the symlinks one key may pass through (a loop ends
// there), as the kernel's ELOOP does.
const maxLinks = 40

// resolve maps key to a real path inside the root, following symlinks one
// component at a time; fi is the Lstat of the last component (never a
// symlink). A key that leaves the root, or a link whose target does, is
// refused with ErrUnsafe whether or not the target exists. A missing key
// matches fs.ErrNotExist.
func (s *store) resolve(key string) (string, fs.FileInfo, error) {
	if err := checkKey(key); err != nil {
		return "", nil, err
	}
	cur := s.root
	todo := strings.Split(key, "/")
	links := 0
	var fi fs.FileInfo
	for len(todo) > 0 {
		seg := todo[0]
		todo = todo[1:]
		switch seg {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		if fi != nil && !fi.IsDir() {
			return "", nil, fmt.Errorf("%w: %s: %w", engine.ErrIO, key, fs.ErrNotExist)
		}
		next := filepath.Join(cur, seg)
		st, err := os.Lstat(next)
		if err != nil {
			if !s.within(cur) {
				return "", nil, fmt.Errorf("%w: key %q leads outside the store (to %s)", ErrUnsafe, key, next)
			}
			return "", nil, ioErr(err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return "", nil, fmt.Errorf("%w: key %q passes through more than %d symlinks", ErrUnsafe, key, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", nil, ioErr(err)
			}
			if filepath.IsAbs(target) {
				cur = filepath.VolumeName(target) + string(filepath.Separator)
			}
			todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
			fi = nil
			continue
		}
		cur, fi = next, st
	}
	if fi == nil || !s.within(cur) {
		return "", nil, fmt.Errorf("%w: key %q leads outside the store (to %s)", ErrUnsafe, key, cur)
	}
	return cur, fi, nil
}

// exists reports whether key names a file (of any kind) in the store;
// errors other than a missing key (a key leaving the store) are returned.
func (s *store) exists(key string) (bool, error) {
	_, _, err := s.resolve(key)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// read returns the bytes of the regular file at key, refusing one longer
// than bound: at most bound+1 bytes are read whatever the file claims, so
// a file that grows while it is read cannot push the read past the bound.
func (s *store) read(ctx context.Context, key string, bound int64) ([]byte, error) {
	p, fi, err := s.resolve(key)
	if err != nil {
		return nil, err
	}
	// Refused before opening: an open(2) of a FIFO with no writer
	// blocks, past any context.
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, key, fileKind(fi.Mode()))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, ioErr(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, ioErr(err)
	} else if !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		return nil, fmt.Errorf("%w: %s changed while it was opened", ErrUnsafe, key)
	}
	b, err := readBounded(f, fi.Size(), bound)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

// readBounded reads r to its end, refusing more than bound bytes; size is
// what r claims to hold, which sizes the buffer but is not trusted: at
// most bound+1 bytes are read whatever r holds.
func readBounded(r io.Reader, size, bound int64) ([]byte, error) {
	want := min(max(size, 0), bound) + 1
	buf := make([]byte, want)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return buf[:n], nil
	case err != nil:
		return nil, ioErr(err)
	}
	// More than claimed: read on, to the bound.
	rest, err := io.ReadAll(io.LimitReader(r, bound+1-int64(n)))
	if err != nil {
		return nil, ioErr(err)
	}
	if buf = append(buf, rest...); int64(len(buf)) > bound {
		return nil, fmt.Errorf("%w: holds more than %d bytes", ErrCorrupt, bound)
	}
	return buf, nil
}

// readDir lists the directory at key ("" for the root).
func (s *store) readDir(key string) ([]fs.DirEntry, error) {
	p := s.root
	if key != "" {
		var fi fs.FileInfo
		var err error
		if p, fi, err = s.resolve(key); err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, nil
		}
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, ioErr(err)
	}
	return ents, nil
}

// parseCoord parses one chunk key coordinate: decimal digits only.
func parseCoord(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	u, err := strconv.ParseUint(s, 10, 64)
	return u, err == nil
}

// listChunks finds the stored chunks of the array at key by listing its
// directories, so that the work is bounded by what the store holds and
// not by the chunk grid (an array of 2^60 chunks with three stored costs
// three reads). Names that are not chunk keys of the grid are ignored, as
// Zarr readers ignore them (chunks left beyond a shrunk shape).
func (s *store) listChunks(ctx context.Context, key string, m *arrayMeta, grid []uint64) ([][]uint64, error) {
	rank := len(grid)
	var out [][]uint64
	if m.sep == "." {
		ents, err := s.readDir(key)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			name := e.Name()
			if m.prefix != "" {
				var ok bool
				if name, ok = strings.CutPrefix(name, m.prefix+"."); !ok {
					continue
				}
			}
			parts := strings.Split(name, ".")
			if len(parts) != rank {
				continue
			}
			c := make([]uint64, rank)
			ok := true
			for d, p := range parts {
				if c[d], ok = parseCoord(p); !ok || c[d] >= grid[d] {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, c)
			}
		}
		return out, nil
	}
	var walk func(dirKey string, prefix []uint64) error
	walk = func(dirKey string, prefix []uint64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := s.readDir(dirKey)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		d := len(prefix)
		for _, e := range ents {
			u, ok := parseCoord(e.Name())
			if !ok || u >= grid[d] {
				continue
			}
			c := append(prefix[:d:d], u)
			if d == rank-1 {
				out = append(out, c)
				continue
			}
			if err := walk(joinKey(dirKey, e.Name()), c); err != nil {
				return err
			}
		}
		return nil
	}
	start := key
	if m.prefix != "" {
		start = joinKey(key, m.prefix)
		if ok, err := s.exists(start); err != nil || !ok {
			return nil, err
		}
	}
	return out, walk(start, nil)
}
