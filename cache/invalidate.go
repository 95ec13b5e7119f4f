package cache

import "context"

// Invalidate drops every cached chunk of the dataset because what its
// layout names changed under the cache: a read-only file adopting a newer
// commit, whose index or extent now names other bytes. No chunk cached
// before the call serves a request after it.
//
// Flush with evict drops only the chunks nobody uses at that moment, which
// is its contract (a flush must not wait for readers); here a chunk that
// background work holds at that moment would survive with the old state's
// contents: the condense pass of any dataset's eviction pins chunks of
// sparse and variable-length datasets, the prefetcher loads chunks at
// locations it looked up earlier, the trimmer evicts. So Invalidate
// counts as a relocation (a load or prefetch that looked up before the
// call looks up again or gives up), waits for the file's prefetches, and
// drops every chunk, waiting for busy ones to be released. Dirty chunks
// are written first (a read-only owner has none).
//
// The caller keeps the dataset's own requests out meanwhile (the engine
// holds it exclusively in its serializer) and switches the layout to the
// new state before calling, so that nothing loaded afterwards comes from
// the old one.
func (d *Dataset) Invalidate(ctx context.Context) error {
	c := d.c
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	d.relocs.Add(1)
	d.file.waitPrefetches(false)
	return c.dropAllSettled(ctx, d, false)
}
