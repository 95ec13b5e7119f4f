// Package serve exposes an open scc file over HTTP as a read-only Zarr
// store (format v2 or v3), so that every Zarr reader (zarr-python through
// fsspec, xarray, dask, zarrita, neuroglancer) reads the file where it is,
// while a writer still appends to it, without a copy.
//
// A Server is an http.Handler over one engine.File, opened read-only as a
// follower of the file's writer (or the writer's own File, in-process).
// The view it serves is the file's tree: the root and every group with
// their attributes (.zgroup and .zattrs in v2, zarr.json in v3), every
// dataset as an array (dense, sparse with its fill, contiguous, virtual),
// and in v2 the consolidated metadata (.zmetadata) so that one request
// opens the whole tree. What Zarr cannot hold (variable-length datasets,
// UTF-8 and non-NUL-padded strings, names Zarr reserves, attributes of
// types without a JSON form) is left out and logged with why.
// The mapping is the Zarr export's own (internal/zarrmap), so a served
// view and an exported store of one file say the same, but for the
// dimension names the view adds for xarray (v2: _ARRAY_DIMENSIONS, v3:
// dimension_names; see dimsAttr).
//
// Chunks: a dataset whose filter pipeline maps onto Zarr codecs (shuffle,
// zlib, zstd, lz4, crc32c in v3, raw deflate rewrapped as zlib or gzip)
// declares them and serves its chunks as stored, read with the engine's
// raw chunk API and never decoded and re-encoded (a chunk whose compressor
// the engine skipped because it did not shrink is the exception: it is
// re-encoded with the declared chain). Other datasets declare no codec
// and serve their chunks decoded. A chunk that is not stored answers 404,
// which Zarr readers read as the fill value. Every chunk read goes
// through the engine's shared chunk cache: a chunk served decoded is read
// like any read; one served as stored is read with
// Dataset.ReadChunkRawShared, ordered with every other request by the
// engine's serializer (a dirty cached copy written back first), its
// stored frame held in the cache under the cache's budget and shared by
// every concurrent request for it (one file read, one buffer, written to
// each client without a copy). The bytes responses make beside the
// cache's (chunks decoded, rewrapped, re-encoded or gzipped) are bounded
// by Options.MaxChunkBytes.
//
// Live: by default a background loop follows the writer (File.Follow,
// follow.go) and rebuilds the view at each commit it sees, so a frame the
// writer Flushed is served within about the File's FollowInterval (10 ms
// for a local file), with the extents and datasets it added, and requests
// do no refresh work. With Options.Refresh positive the server refreshes
// lazily instead: before answering, if its last refresh is older than
// that bound. Responses carry an ETag (for a chunk served as
// stored, the chunk index's record of its stored frame: checksum, address
// and size; for other content, its hash), Last-Modified and
// Cache-Control: no-cache, so readers revalidate instead of caching what
// can change. A revalidation of a chunk served as stored is answered 304
// from the chunk index without reading the chunk; other conditional
// requests, ranges and HEAD are answered by net/http's ServeContent.
// Bodies that are not compressed already (metadata, chunks with no
// compressor declared) go gzipped to clients that take gzip when that
// shrinks them (gzip.go); compressed chunks never are.
//
// The web page: GET / answers a page (embedded, no build step, nothing
// loaded from elsewhere) that lists the tree with types, shapes,
// chunking, attributes, storage and cache figures, and shows a 2-D slice
// of any numeric dataset as an image rendered by the server (PNG, with a
// contrast range and a colour map), following the file as it grows. Its
// resources live under WebPrefix ("/__scc/"), a prefix no Zarr key can
// have (web.go).
//
// Security: with Options.Token set every request must carry it (an
// Authorization: Bearer header or a token query parameter, compared in
// constant time). Only the view's keys are reachable: a key with "..",
// ".", empty segments, encoded slashes, backslashes or NUL, or longer than
// MaxKeyLen is refused with 400, an unknown key is 404, and no request
// panics. At most Options.MaxInFlight requests run at once, at most
// Options.MaxPerClient of one client address; the others get 503. NewHTTPServer sets the http.Server's timeouts and header bound, and
// CheckAddr refuses a non-loopback address without a token unless told.
//
// A Server is safe for concurrent use by any number of requests.
package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/scc-dev/scc/engine"
)

// Options configure a Server. The zero value serves Zarr v2 without a
// token, refreshing at most every 100 ms, 64 requests at a time.
type Options struct {
	// Format is the Zarr format served: 2 (default) or 3.
	Format int
	// Token, when set, is required of every request.
	Token string
	// Refresh says how the view follows the file. 0 (the default): a
	// background loop follows the writer (File.Follow) and rebuilds the
	// view as soon as it sees a new commit, within the File's
	// FollowInterval (10 ms for a local file), and requests do no
	// refresh work. A positive value refreshes lazily instead: a request
	// arriving later than this after the last refresh refreshes first,
	// so the view is at most this old. A negative value never refreshes
	// but when told (Server.Refresh).
	Refresh time.Duration
	// MaxInFlight bounds the requests served at once; past it a request
	// is answered 503 at once. 0 means 64.
	MaxInFlight int
	// MaxPerClient bounds the requests of one client address served at
	// once; past it its requests are answered 503. 0 means MaxInFlight
	// (no bound of its own). Clients behind one proxy or NAT share an
	// address, and so a bound.
	MaxPerClient int
	// MaxChunkBytes bounds the bytes of the chunks made for responses
	// and held at once: chunks decoded, rewrapped, re-encoded or gzipped
	// (each counted at its decoded size, which bounds the others too); a
	// request waits for room. 0 means 256 MiB. A chunk larger than the
	// bound is served alone. Chunks served as stored are held in the
	// shared chunk cache instead, under its budget.
	MaxChunkBytes int64
	// Logger receives what the view leaves out and why, and the errors
	// answered 500. nil means slog.Default().
	Logger *slog.Logger
	// Path, when set, is the local path the File was opened from, which
	// the server then follows when the file is replaced under it: when
	// the path names another file than the one served (a writer that
	// creates the file anew and renames it into place), when a refresh
	// finds the file it follows damaged or with another identity (a file
	// created anew in place), or when a read finds it damaged. It opens
	// the path again (engine.Open with OpenOptions, read-only),
	// serves the new file from then on and closes the old one once no
	// request uses it (the File given to New stays the caller's to
	// close). Without Path a replaced file is served as it was, or, when
	// it was rewritten in place, its reads fail with 500.
	Path string
	// OpenOptions are the options Path is opened again with; nil means
	// read-only with the defaults.
	OpenOptions *engine.Options
}

// DefaultRefresh is how often a server that follows the writer
// (Options.Refresh 0) looks whether its path names another file
// (Options.Path), and how often it retries a refresh that failed.
const DefaultRefresh = 100 * time.Millisecond

// MaxKeyLen bounds the length of a request's path.
const MaxKeyLen = 4096

// Server is the HTTP handler of one file's Zarr view. Close it when done;
// it does not close the File.
type Server struct {
	// f is the File served; orig the one given to New, which the server
	// does not close. f changes only under refreshMu.
	f       *engine.File
	orig    *engine.File
	path    string
	openOpt engine.Options
	// ident is the file at path that f reads (reopen); suspect is set
	// when a read found f damaged, so that the next refresh checks
	// whether the path names another file now.
	ident   os.FileInfo
	suspect atomic.Bool
	// files counts the views of each File served, so that a replaced
	// one closes after the last request reading it.
	filesMu sync.Mutex
	files   map[*engine.File]*fileUse
	version int
	token   string
	every   time.Duration
	log     *slog.Logger
	sem     chan struct{}
	// perClient counts each client address's requests in flight (at
	// most maxPerClient), when that bound is below the server's.
	perClientMu  sync.Mutex
	perClient    map[string]int
	maxPerClient int
	// bytes bounds the chunk bytes held for responses (maxBytes).
	bytes    *semaphore.Weighted
	maxBytes int64

	// refreshMu serializes refreshes and view rebuilds; last is when the
	// last one finished, as time since epoch (monotonic), read without
	// the lock so that a request within the bound takes no lock shared
	// by every request.
	refreshMu sync.Mutex
	epoch     time.Time
	last      atomic.Int64

	// following: the view follows the writer from the background
	// (follow.go), and requests do no refresh work. stopFollow ends the
	// loops, followers counts them; refollow (under refreshMu) ends the
	// following of the File being replaced, so that the loop follows the
	// new one.
	following  bool
	stopFollow context.CancelFunc
	followers  sync.WaitGroup
	refollow   context.CancelFunc

	// mu guards cur against its replacement while a request takes a
	// reference to it.
	mu     sync.RWMutex
	cur    *view
	closed bool

	// logged holds what logOnce has logged.
	loggedMu sync.Mutex
	logged   map[string]bool
}

// New returns a Server of f's Zarr view as it is now.
func New(ctx context.Context, f *engine.File, o Options) (*Server, error) {
	if o.Format == 0 {
		o.Format = 2
	}
	if o.Format != 2 && o.Format != 3 {
		return nil, fmt.Errorf("%w: Zarr format %d (want 2 or 3)", engine.ErrInvalid, o.Format)
	}
	following := o.Refresh == 0
	if following {
		o.Refresh = DefaultRefresh
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 64
	}
	if o.MaxInFlight < 0 {
		return nil, fmt.Errorf("%w: MaxInFlight %d", engine.ErrInvalid, o.MaxInFlight)
	}
	if o.MaxPerClient < 0 {
		return nil, fmt.Errorf("%w: MaxPerClient %d", engine.ErrInvalid, o.MaxPerClient)
	}
	if o.MaxPerClient == 0 || o.MaxPerClient > o.MaxInFlight {
		o.MaxPerClient = o.MaxInFlight
	}
	if o.MaxChunkBytes == 0 {
		o.MaxChunkBytes = 256 << 20
	}
	if o.MaxChunkBytes < 0 {
		return nil, fmt.Errorf("%w: MaxChunkBytes %d", engine.ErrInvalid, o.MaxChunkBytes)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{
		f: f, orig: f, path: o.Path, version: o.Format, token: o.Token, every: o.Refresh, log: o.Logger,
		sem: make(chan struct{}, o.MaxInFlight), logged: map[string]bool{}, files: map[*engine.File]*fileUse{},
		perClient: map[string]int{}, maxPerClient: o.MaxPerClient,
		bytes: semaphore.NewWeighted(o.MaxChunkBytes), maxBytes: o.MaxChunkBytes,
	}
	if o.Path != "" {
		if o.OpenOptions != nil {
			s.openOpt = *o.OpenOptions
		}
		s.openOpt.ReadOnly = true
		fi, err := os.Stat(o.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", engine.ErrIO, err)
		}
		s.ident = fi
	}
	v, err := s.build(ctx, nil)
	if err != nil {
		return nil, err
	}
	s.cur = v
	s.epoch = time.Now()
	s.last.Store(0)
	if following {
		s.startFollowing()
	}
	return s, nil
}

// Close releases the view's dataset handles once the requests using them
// are done; later requests are answered 503. The File stays open.
func (s *Server) Close() error {
	if s.stopFollow != nil {
		s.stopFollow()
		s.followers.Wait()
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	s.mu.Lock()
	v := s.cur
	s.cur, s.closed = nil, true
	s.mu.Unlock()
	if v != nil {
		v.retire()
	}
	s.fileRetired(s.f)
	return nil
}

// Refresh brings the view up to the writer's latest commit now, whatever
// the time since the last refresh.
func (s *Server) Refresh(ctx context.Context) error {
	return s.sync(ctx, true)
}

// sync refreshes the File and rebuilds the view if the last refresh is
// older than the bound (or force). Requests that arrive during a refresh
// wait for it, so none is answered from a view older than the bound.
func (s *Server) sync(ctx context.Context, force bool) error {
	if s.every < 0 && !force {
		return nil
	}
	if !force && s.fresh() {
		return nil
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if !force && s.fresh() {
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
	replaced := s.replaced()
	var err error
	if !replaced {
		err = s.f.Refresh(ctx)
		// Damage, or another file where the one followed was: a fresh
		// open of the path tells which.
		replaced = err != nil && s.path != "" && errors.Is(err, engine.ErrCorrupt)
	}
	// A failed refresh is tried again after the bound, not by every
	// request: a writer that keeps reusing the space being read
	// (ErrStale) is caught up with next time, and the view stays as it
	// was until then. The time is published when the new view is in
	// place: a request that sees it takes no lock and must find that
	// view.
	at := time.Since(s.epoch)
	defer s.last.Store(int64(at))
	if replaced {
		return s.reopen(ctx, old)
	}
	if err != nil {
		return err
	}
	if !old.stale() {
		return nil
	}
	v, err := s.build(ctx, old)
	if err != nil {
		return err
	}
	return s.install(v, old, false)
}

// fresh reports whether the last refresh finished less than the bound
// ago.
func (s *Server) fresh() bool {
	return time.Since(s.epoch)-time.Duration(s.last.Load()) < s.every
}

// install makes v the current view in place of old; closeOld says that
// old's File is the server's to close (a replaced file) once no request
// uses old.
func (s *Server) install(v, old *view, closeOld bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		v.retire()
		return errClosed
	}
	s.cur = v
	s.mu.Unlock()
	old.retire()
	if closeOld {
		s.fileRetired(old.f)
	}
	return nil
}

// fileUsed counts a view reading f; the function it returns uncounts it.
// A File the server opened itself closes once it is retired (replaced,
// or the server closed) and no view reads it.
func (s *Server) fileUsed(f *engine.File) func() {
	s.filesMu.Lock()
	u := s.files[f]
	if u == nil {
		u = &fileUse{}
		s.files[f] = u
	}
	u.views++
	s.filesMu.Unlock()
	return func() {
		s.filesMu.Lock()
		u.views--
		closeIt := u.views == 0 && u.retired
		if closeIt {
			delete(s.files, f)
		}
		s.filesMu.Unlock()
		if closeIt && f != s.orig {
			f.Close(context.Background())
		}
	}
}

// fileRetired marks f replaced: it closes when no view reads it.
func (s *Server) fileRetired(f *engine.File) {
	s.filesMu.Lock()
	u := s.files[f]
	closeIt := u == nil
	if u != nil {
		u.retired = true
		closeIt = u.views == 0
		if closeIt {
			delete(s.files, f)
		}
	}
	s.filesMu.Unlock()
	if closeIt && f != s.orig {
		f.Close(context.Background())
	}
}

// fileUse counts the views reading one File.
type fileUse struct {
	views   int
	retired bool
}

// replaced reports whether the served file's path names another file
// than the one served, or a read found the file damaged: either way a
// fresh open of the path is due. Caller holds refreshMu.
func (s *Server) replaced() bool {
	if s.path == "" {
		return false
	}
	if s.suspect.Swap(false) {
		return true
	}
	fi, err := os.Stat(s.path)
	// A path gone for the while (between a writer's unlink and its
	// rename) is not a replacement yet: the old file is served.
	return err == nil && !os.SameFile(fi, s.ident)
}

// reopen opens the served path again and serves the file found there in
// place of the one old was built from. If it cannot be opened (not yet
// whole, or damaged) the old view stays and the next refresh tries
// again. Caller holds refreshMu.
func (s *Server) reopen(ctx context.Context, old *view) error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("%w: reopen: %v", engine.ErrIO, err)
	}
	nf, err := engine.Open(ctx, s.path, &s.openOpt)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", s.path, err)
	}
	prev := s.f
	s.f = nf
	v, err := s.build(ctx, nil)
	if err != nil {
		s.f = prev
		s.fileRetired(nf)
		return err
	}
	s.ident = fi
	s.log.Info("zarr view: the file was replaced; serving the new one", "path", s.path)
	if s.refollow != nil {
		s.refollow() // the follow loop moves to the new file
	}
	return s.install(v, old, prev != s.orig)
}

var errClosed = errors.New("serve: server closed")

// acquire returns the current view with a reference held, nil once the
// server is closed.
func (s *Server) acquire() *view {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cur != nil {
		s.cur.acquire()
	}
	return s.cur
}

// logSkip logs once why name is left out of the view.
func (s *Server) logSkip(name, why string) {
	s.logOnce(slog.LevelWarn, "zarr view: left out", name, why)
}

// logOnce logs msg about name once per reason, so that a rebuilt view
// does not log it again.
func (s *Server) logOnce(level slog.Level, msg, name, why string) {
	s.loggedMu.Lock()
	k := msg + "\x00" + name + "\x00" + why
	seen := s.logged[k]
	s.logged[k] = true
	s.loggedMu.Unlock()
	if !seen {
		s.log.Log(context.Background(), level, msg, "name", name, "reason", why)
	}
}

// ServeHTTP answers one request for a key of the view.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests in flight", http.StatusServiceUnavailable)
		return
	}
	if s.maxPerClient < cap(s.sem) {
		client, _, _ := net.SplitHostPort(r.RemoteAddr)
		if !s.enter(client) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests in flight from this address", http.StatusServiceUnavailable)
			return
		}
		defer s.leave(client)
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="scc"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key, err := cleanKey(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The refresh serves every request waiting for it: a client that
	// goes away does not cancel it.
	if !s.following {
		if err := s.sync(context.WithoutCancel(r.Context()), false); err != nil && !errors.Is(err, errClosed) {
			// Serving the last view is better than failing: it is one
			// refresh behind, and the next request tries again.
			s.log.Warn("zarr view: refresh failed; serving the last view", "err", err)
		}
	}
	v := s.acquire()
	if v == nil {
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	}
	defer v.release()
	s.serveKey(w, r, v, key)
}

// enter counts a request of client, unless it has maxPerClient in
// flight already.
func (s *Server) enter(client string) bool {
	s.perClientMu.Lock()
	defer s.perClientMu.Unlock()
	if s.perClient[client] >= s.maxPerClient {
		return false
	}
	s.perClient[client]++
	return true
}

func (s *Server) leave(client string) {
	s.perClientMu.Lock()
	defer s.perClientMu.Unlock()
	if s.perClient[client]--; s.perClient[client] == 0 {
		delete(s.perClient, client)
	}
}

// authorized reports whether r carries the token, if one is required.
func (s *Server) authorized(r *http.Request) bool {
	if s.token == "" {
		return true
	}
	got := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			got = strings.TrimSpace(cred)
		}
	} else if q, err := queryToken(r); err == nil {
		got = q
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

func queryToken(r *http.Request) (string, error) {
	if r.URL.RawQuery == "" {
		return "", nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", err
	}
	return q.Get("token"), nil
}

// cleanKey returns the store key a request names (its path without the
// leading slash), refusing every path that could name something outside
// the view or that a store key cannot be: encoded slashes and
// backslashes, NUL and other control characters, empty, "." and ".."
// segments, overlong paths.
func cleanKey(r *http.Request) (string, error) {
	raw := r.URL.EscapedPath()
	if len(raw) > MaxKeyLen || len(r.URL.Path) > MaxKeyLen {
		return "", errors.New("key too long")
	}
	lower := strings.ToLower(raw)
	for _, bad := range []string{"%2f", "%5c", "%00"} {
		if strings.Contains(lower, bad) {
			return "", errors.New("encoded slash, backslash or NUL in the key")
		}
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("key must start with /")
	}
	key := p[1:]
	if key == "" {
		return "", nil
	}
	for _, c := range []byte(key) {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "", errors.New("control character or backslash in the key")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", errors.New(`empty, "." or ".." segment in the key`)
		}
	}
	return key, nil
}

// CheckAddr refuses to listen on addr (host:port) when its host is not a
// loopback address and neither a token nor insecure is given: a Zarr view
// reachable from other machines must be guarded, or knowingly open.
func CheckAddr(addr, token string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", engine.ErrInvalid, addr, err)
	}
	if token != "" || insecure || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: address %q is not a loopback address and no token is required", engine.ErrInvalid, addr)
}

// isLoopback reports whether host names only loopback addresses: an IP
// literal that is loopback, or "localhost". An empty host (all
// interfaces) and any other name are not.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// NewHTTPServer returns an http.Server for h on addr with the bounds a
// server reachable by others needs: slow or idle clients are timed out and
// request headers are bounded. Keep-alive stays on. Response writes have
// no deadline (a large chunk to a slow reader is legitimate); the idle
// timeout and the handler's in-flight bound limit what a stalled client
// holds.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
