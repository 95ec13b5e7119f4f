package main

import (
	"context"
	"fmt"
	"io"

	"github.com/scc-dev/scc/engine"
)

func init() {
	register("clear-image", "remove a file's cache image (like h5clear --image)", cmdClearImage)
}

// cmdClearImage removes a file's cache image (h5clear's -m /
// --image): it opens the file for writing without asking for an image and
// commits, which drops the superblock's image record and frees the image's
// space, as any writable open's first commit does. A file without an image
// is left unchanged, with a warning on stderr (as h5clear warns).
func cmdClearImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("clear-image", "FILE\n\n"+fileHelp, stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	// Look first without taking the writer's lock or committing.
	ro, roDone, err := openPath(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	info := ro.ImageInfo()
	if err := roDone(); err != nil {
		return err
	}
	if !info.Exists {
		fmt.Fprintf(stderr, "scctl clear-image: warning: %s has no cache image\n", path)
		return nil
	}
	f, done, err := openPath(ctx, path, nil)
	if err != nil {
		return err
	}
	if err := f.Flush(ctx); err != nil {
		done()
		return err
	}
	if f.ImageInfo().Exists {
		done()
		return fmt.Errorf("%s: the commit kept the cache image", path)
	}
	if err := done(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: removed the cache image (%d bytes at %d)\n", path, info.Size, info.Addr)
	return nil
}
