package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/vfd"
)

// createLocal creates the local file at path, replacing any file there,
// and opens it for writing (Create).
//
// The file appears at path only once it holds its first commit: it is
// made under a temporary name in the same directory, committed (and
// synced, unless Options.NoSync), and then renamed over path (linked, when
// nothing was there). A reader, or a virtual dataset following the path,
// therefore never finds a file without a superblock there, whatever
// moment it looks or the creator dies. A file that was at path is
// replaced whole, not truncated: a reader that has it open keeps reading
// it, and its Refresh reports the replacement.
//
// The writer lock is kept: a file at path that another writer holds is
// not replaced (ErrLocked), and the new file is locked before it appears,
// so a second Create sees it locked. A symbolic link at path is followed;
// the file it names is the one replaced. Where a file cannot be made
// beside path (a directory this process may not write), an existing file
// is truncated in place as before.
func createLocal(ctx context.Context, path string, opts *Options) (*File, error) {
	if err := checkRegular(path, true); err != nil {
		return nil, err
	}
	target := linkTarget(path)
	for try := 0; ; try++ {
		f, retry, err := createAt(ctx, target, opts)
		if retry && try < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		f.path = path
		return f, nil
	}
}

// linkTarget follows the symbolic links at path to the name of the file
// they lead to, which need not exist yet (a dangling link is created
// through, as an open with O_CREATE does). checkRegular has refused a
// loop already; the bound is the kernel's.
func linkTarget(path string) string {
	for range 40 {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return path
		}
		l, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(path), l)
		}
		path = l
	}
	return path
}

// testHookCreateStaged, when set (tests only), runs in Create once the
// new file holds its first commit under its temporary name, before it is
// renamed over its final one.
var testHookCreateStaged func(tmp string)

// createAt is one attempt of Create at path (no symbolic link). retry
// reports that another creator changed path meanwhile.
func createAt(ctx context.Context, path string, opts *Options) (f *File, retry bool, err error) {
	// The file there now, locked: no writer is using it, and none will
	// start until it is replaced.
	old, err := vfd.Open(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return nil, false, classify(err)
	}
	defer func() {
		if old != nil {
			old.Close()
		}
	}()
	perm := os.FileMode(0o644)
	if old != nil {
		fi, err := old.Stat()
		if err != nil {
			return nil, false, classify(err)
		}
		cur, err := os.Stat(path)
		if err != nil || !os.SameFile(fi, cur) {
			return nil, true, fmt.Errorf("%w: %s was replaced while being created", ErrLocked, path)
		}
		perm = fi.Mode().Perm()
	}
	tmp := tempName(path)
	drv, err := vfd.Open(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if old != nil && (errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrExist)) {
			f, err := createInPlace(ctx, old, opts)
			if err == nil {
				old = nil // the File's now
			}
			return f, false, err
		}
		return nil, false, classify(err)
	}
	if old != nil {
		// Not subject to the umask, as truncating the file kept its mode.
		_ = os.Chmod(tmp, perm)
	}
	// Until it is published the File does not own drv: a failure
	// releases the File, then closes drv and removes the file.
	fail := func(retry bool, err error) (*File, bool, error) {
		if f != nil {
			f.release()
		}
		drv.Close()
		os.Remove(tmp)
		return nil, retry, err
	}
	noWriteBehind(drv, opts)
	f, err = createDriver(ctx, drv, opts)
	if err != nil {
		f = nil
		return fail(false, err)
	}
	if testHookCreateStaged != nil {
		testHookCreateStaged(tmp)
	}
	if old != nil {
		err = os.Rename(tmp, path)
	} else {
		// A link fails if another creator's file appeared at path
		// meanwhile, where a rename would replace it unseen.
		if err = os.Link(tmp, path); err == nil {
			_ = os.Remove(tmp) // at worst a stray name; the file is published
		} else if errors.Is(err, os.ErrExist) {
			return fail(true, fmt.Errorf("%w: %s was created by another writer meanwhile", ErrLocked, path))
		} else if !errors.Is(err, os.ErrNotExist) {
			// No hard links here: a rename, which another creator
			// could only race in the same instant.
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		return fail(false, classify(err))
	}
	f.ownDrv = true
	if !f.noSync {
		// The name durable with the file: a crash must not leave the
		// old file, or none, at path after Create returned.
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.release()
			return nil, false, classify(err)
		}
	}
	return f, false, nil
}

// createInPlace truncates the locked file old and creates the container
// on it: Create where no file can be made beside the path.
func createInPlace(ctx context.Context, old *vfd.File, opts *Options) (*File, error) {
	if err := old.Truncate(0); err != nil {
		return nil, classify(err)
	}
	noWriteBehind(old, opts)
	f, err := createDriver(ctx, old, opts)
	if err != nil {
		return nil, err
	}
	f.ownDrv = true
	return f, nil
}

// tempName is a name beside path for a file being created.
func tempName(path string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b[:])+".creating")
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
