package serve

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/scc-dev/scc/engine"
)

// Following the writer (Options.Refresh 0): a background loop follows the
// served File with File.Follow, which looks at the file every millisecond
// after a commit, backing off to the File's FollowInterval, and rebuilds
// the view at each new generation, so that a frame the writer Flushed is
// served within about that interval, and a request never waits for a
// refresh. A failed look (the file damaged, or created anew in place)
// goes to sync, which opens the path again when it names another file;
// with Options.Path a second loop also looks every DefaultRefresh whether
// the path names another file than the one followed (a writer that
// creates the file anew and renames it into place, which the followed
// file does not show). After a reopen the follow loop follows the new
// File. Close ends both loops and waits for them.

// startFollowing starts the loops.
func (s *Server) startFollowing() {
	ctx, cancel := context.WithCancel(context.Background())
	s.following, s.stopFollow = true, cancel
	s.followers.Add(1)
	go func() {
		defer s.followers.Done()
		s.followLoop(ctx)
	}()
	if s.path != "" {
		s.followers.Add(1)
		go func() {
			defer s.followers.Done()
			s.watchPath(ctx)
		}()
	}
}

// followLoop follows the served File until ctx ends, moving to the new
// File when the served one is replaced (reopen cancels the old one's
// following).
func (s *Server) followLoop(ctx context.Context) {
	for ctx.Err() == nil {
		s.refreshMu.Lock()
		f := s.f
		fctx, cancel := context.WithCancel(ctx)
		s.refollow = cancel
		s.refreshMu.Unlock()
		for _, err := range f.Follow(fctx) {
			if fctx.Err() != nil {
				break
			}
			if err == nil {
				err = s.advance(ctx, f)
			} else if !errors.Is(err, engine.ErrClosed) {
				// Damage, a replacement, or a writer racing the look:
				// sync tells which (at most every DefaultRefresh).
				err = s.sync(ctx, false)
			}
			if err != nil && !errors.Is(err, errClosed) && ctx.Err() == nil {
				s.logOnce(slog.LevelWarn, "zarr view: following the file failed; serving the last view", s.path, err.Error())
			}
		}
		// Follow ends only when fctx does, or when f is closed: then the
		// loop waits for a reopen (or the server's Close).
		<-fctx.Done()
		cancel()
	}
}

// advance rebuilds the view after Follow saw f move to a new generation
// (f is refreshed already), unless the view is f's current one or f is
// no longer the File served.
func (s *Server) advance(ctx context.Context, f *engine.File) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if s.f != f {
		return nil
	}
	s.mu.RLock()
	old, closed := s.cur, s.closed
	if old != nil {
		old.acquire()
	}
	s.mu.RUnlock()
	if closed {
		return errClosed
	}
	defer old.release()
	at := time.Since(s.epoch)
	defer s.last.Store(int64(at))
	if !old.stale() {
		return nil
	}
	v, err := s.build(ctx, old)
	if err != nil {
		return err
	}
	return s.install(v, old, false)
}

// watchPath looks every DefaultRefresh whether the served path names
// another file, or a read found the file damaged, and if so serves the
// file found there (sync).
func (s *Server) watchPath(ctx context.Context) {
	t := time.NewTicker(DefaultRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.sync(ctx, true); err != nil && !errors.Is(err, errClosed) && ctx.Err() == nil {
			s.logOnce(slog.LevelWarn, "zarr view: refresh failed; serving the last view", s.path, err.Error())
		}
	}
}
