package cache

import "fmt"

// SetMinBytes changes the dataset's minimum reservation (SCC design §2.3
// min_dset_size, which the SCC internal API puts among a dataset's access
// properties, chosen at open) with the meaning DatasetOptions.MinBytes
// gives it: 0 takes Config.MinBytes, -1 means none. It holds until the
// dataset's next registration, which sets it again. Eviction reads the
// minimum on every pass, so a lower one lets the next pass take the
// dataset's chunks; nothing is evicted here.
//
// Safe for concurrent use.
func (d *Dataset) SetMinBytes(n int64) error {
	if n < -1 {
		return fmt.Errorf("%w: MinBytes %d", ErrInvalidConfig, n)
	}
	switch {
	case n == 0:
		n = d.c.sizes.current().minBytes
	case n < 0:
		n = 0
	}
	d.min.Store(n)
	return nil
}

// SetPrefetch turns the prefetcher on or off for this dataset alone; a
// registration turns it on again. Turning it on needs a cache whose
// prefetcher runs (Config.Prefetch): ErrInvalidConfig otherwise, since
// this dataset's reads would silently prefetch nothing.
//
// Safe for concurrent use.
func (d *Dataset) SetPrefetch(on bool) error {
	if on && d.c.background.prefetch.max <= 0 {
		return fmt.Errorf("%w: prefetch asked for a dataset of a cache without Config.Prefetch", ErrInvalidConfig)
	}
	d.noPrefetch.Store(!on)
	return nil
}
