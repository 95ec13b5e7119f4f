package cache

import "context"

// Discard drops every cached chunk of the dataset, dirty ones included,
// without writing any: its owner deleted the dataset, so no chunk of it
// may reach the file again. Like Invalidate it counts as a relocation and
// waits for the file's prefetches and for busy chunks to be released. The
// caller keeps the dataset's own requests out meanwhile.
func (d *Dataset) Discard(ctx context.Context) error {
	c := d.c
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	d.relocs.Add(1)
	d.file.waitPrefetches(false)
	return c.dropAllSettled(ctx, d, true)
}
