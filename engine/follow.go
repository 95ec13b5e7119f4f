package engine

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/scc-dev/scc/vfd"
)

// Follow yields the file's generation each time it moves past the last one
// seen, so that a reader of a file another process writes waits for the
// writer's next commit instead of polling Refresh itself:
//
//	for gen, err := range f.Follow(ctx) {
//		if err != nil {
//			return err // or log it and continue: Follow keeps looking
//		}
//		n := ds.Shape()[0] // the frames the writer has committed so far
//		...
//	}
//
// A read-only File looks at the file with Refresh (which also re-evaluates
// its virtual datasets); a writable File sees its own commits. Between
// looks it waits from 1 ms, doubling up to Options.FollowInterval, and
// starts again from 1 ms after each new generation, so a commit is seen
// within about FollowInterval however long the writer was quiet. A Refresh
// error is yielded, and Follow goes on looking if the loop goes on; it ends
// after yielding ctx's error when ctx ends, or ErrClosed when the file is
// closed. Several goroutines may follow one File.
func (f *File) Follow(ctx context.Context) iter.Seq2[uint64, error] {
	return func(yield func(uint64, error) bool) {
		last := f.Generation()
		wait := time.Millisecond
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		for {
			if f.readOnly {
				if err := f.Refresh(ctx); err != nil {
					switch {
					case ctx.Err() != nil:
						yield(0, ctx.Err())
						return
					case errors.Is(err, ErrClosed):
						yield(0, err)
						return
					}
					if !yield(0, err) {
						return
					}
				}
			} else if err := f.checkOpen(); err != nil {
				yield(0, err)
				return
			}
			if g := f.Generation(); g != last {
				last, wait = g, time.Millisecond
				if !yield(g, nil) {
					return
				}
				continue
			}
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				yield(0, ctx.Err())
				return
			case <-timer.C:
			}
			wait = min(2*wait, f.followInterval)
		}
	}
}

// Defaults of Options.FollowInterval: a local file is cheap to look at
// (two superblock slots, read from the page cache); an object store costs a
// request per look.
const (
	defaultFollowLocal  = 10 * time.Millisecond
	defaultFollowRemote = 500 * time.Millisecond
)

// followIntervalOf is Options.FollowInterval, or the default for drv.
func followIntervalOf(opts *Options, drv vfd.Driver) time.Duration {
	if opts.FollowInterval > 0 {
		return opts.FollowInterval
	}
	if _, local := drv.(*vfd.File); local {
		return defaultFollowLocal
	}
	if _, mem := drv.(*vfd.Mem); mem {
		return defaultFollowLocal
	}
	return defaultFollowRemote
}
