package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// The attack suite: what a hostile or broken client can do to a served
// file over a real TCP connection, and what a writer replacing the file
// does. Nothing here asserts a time: waits are bounded only so that a
// hang fails instead of blocking the run.

// listen serves h with NewHTTPServer's bounds on a loopback port, the
// header timeout shortened so that stalled clients are closed soon.
func listen(t *testing.T, h http.Handler) string {
	t.Helper()
	return listenWith(t, h, 100*time.Millisecond)
}

func listenWith(t *testing.T, h http.Handler, headerTimeout time.Duration) string {
	t.Helper()
	srv := NewHTTPServer("127.0.0.1:0", h)
	srv.ReadHeaderTimeout = headerTimeout
	srv.ErrorLog = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// settle waits until the process's goroutines are back to at most base
// plus slack (the runtime's and the test's own come and go), failing if
// they are not within a generous bound.
func settle(t *testing.T, base, slack int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n <= base+slack {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before: leaked\n%s", n, base, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// raw sends req on a new connection and returns the status line and the
// whole answer (the request asks the server to close after it).
func raw(t *testing.T, addr, req string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	line, _, _ := strings.Cut(string(b), "\r\n")
	return line, string(b)
}

// raiseFiles lifts the open-file limit to n if it is lower and the hard
// limit allows, and returns the limit in force.
func raiseFiles(n uint64) uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	if l.Cur < n {
		l.Cur = min(n, l.Max)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	return l.Cur
}

// TestManyConnections: 2000 clients connected at once, each asking for a
// chunk, are each either served or refused with 503 (64 in flight at
// most), and once they are gone the server's goroutines and heap are back
// where they were.
func TestManyConnections(t *testing.T) {
	conns := 2000
	if lim := raiseFiles(2*uint64(conns) + 256); lim < 2*uint64(conns)+256 {
		conns = int(lim-256) / 2
		t.Logf("open-file limit %d: %d connections", lim, conns)
	}
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{MaxInFlight: 4})
	// Every connection is open before any sends its request: the header
	// timeout is the default's, not the shortened one.
	addr := listenWith(t, s, 10*time.Second)
	// One request first, so that lazily started goroutines (the cache's)
	// are in the baseline.
	st, _ := raw(t, addr, "GET /zs/1.2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.Equal(t, "HTTP/1.1 200 OK", st)
	settle(t, runtime.NumGoroutine(), 0)
	base := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := ms.HeapInuse

	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		codes         = map[string]int{}
		start         = make(chan struct{})
		dialed        sync.WaitGroup
		dialErrs      int
		dialErrSample error
	)
	dialed.Add(conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, time.Minute)
			dialed.Done()
			if err != nil {
				mu.Lock()
				dialErrs++
				dialErrSample = err
				mu.Unlock()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Minute))
			<-start // every connection open before any request
			key := fmt.Sprintf("/zs/%d.%d", 1+i%3, i%3)
			if _, err := io.WriteString(c, "GET "+key+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				mu.Lock()
				codes["write: "+err.Error()]++
				mu.Unlock()
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			status := ""
			if err != nil {
				status = "read error"
			} else {
				status = resp.Status
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			codes[status]++
			mu.Unlock()
		}()
	}
	dialed.Wait()
	close(start)
	wg.Wait()
	t.Logf("%d connections: %v", conns, codes)
	require.Zero(t, dialErrs, "dials refused: %v", dialErrSample)
	assert.Equal(t, conns, codes["200 OK"]+codes["503 Service Unavailable"], "every connection served or refused: %v", codes)
	assert.Positive(t, codes["200 OK"])

	settle(t, base, 4)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	assert.Less(t, int64(ms.HeapInuse)-int64(heap), int64(64<<20), "heap back near where it was")
}

// TestHalfOpen: connections that send nothing, half a request line, or a
// header that never ends are closed by the header timeout, and leave no
// goroutine behind.
func TestHalfOpen(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	addr := listen(t, s)
	settle(t, runtime.NumGoroutine(), 0)
	base := runtime.NumGoroutine()
	sends := []string{"", "GET /.zg", "GET /.zgroup HTTP/1.1\r\nHost: x\r\nX-A: b", "GET /.zgroup HTTP/1.1\r\n"}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			_, err = io.WriteString(c, sends[i%len(sends)])
			assert.NoError(t, err)
			c.SetReadDeadline(time.Now().Add(time.Minute)) // a hang fails, not a slow close
			b, err := io.ReadAll(c)
			assert.NoError(t, err, "the server closes the stalled connection")
			assert.NotContains(t, string(b), "200 OK")
		}()
	}
	wg.Wait()
	settle(t, base, 4)
}

// TestHostileRanges: huge, inverted, malformed and many ranges are
// answered 206, 416 or the whole content, never 5xx or a response larger
// than the content's ranges.
func TestHostileRanges(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	whole := get(s, "GET", "/zs/1.2")
	require.Equal(t, http.StatusOK, whole.Code)
	n := whole.Body.Len()
	many := "bytes=" + strings.TrimSuffix(strings.Repeat("0-0,", 2000), ",")
	overlapping := "bytes=" + strings.TrimSuffix(strings.Repeat("0-,", 200), ",")
	for rg, want := range map[string][]int{
		"bytes=0-99999999999999999999":                    {416, 200, 206},
		"bytes=99999999999999999999-":                     {416},
		"bytes=-99999999999999999999":                     {206, 200, 416},
		"bytes=18446744073709551615-18446744073709551615": {416},
		"bytes=5-1":                   {416},
		"bytes=-0":                    {206, 416},
		"bytes=abc":                   {416},
		"bytes=0-1,":                  {206, 416},
		"bytes=--1":                   {416},
		"items=0-1":                   {200, 416},
		"bytes=0-0":                   {206},
		many:                          {200, 206, 416},
		overlapping:                   {200, 206, 416},
		fmt.Sprintf("bytes=%d-", n-1): {206},
		fmt.Sprintf("bytes=%d-", n):   {416},
	} {
		w := get(s, "GET", "/zs/1.2", "Range", rg)
		assert.Contains(t, want, w.Code, "%.60s", rg)
		assert.LessOrEqual(t, w.Body.Len(), n+64*1024, "%.60s: the answer is bounded by the content", rg)
	}
	// Over a real connection: a header larger than the bound is refused.
	// The header timeout is long here: on a loaded machine reading 160 KB
	// of header can take longer than listen's 100 ms, and a timed-out
	// header is closed without an answer, which is not what this checks.
	addr := listenWith(t, s, 10*time.Second)
	st, _ := raw(t, addr, "GET /zs/1.2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nRange: bytes="+strings.Repeat("0-0,", 40000)+"0-0\r\n\r\n")
	assert.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large", st)
}

// TestTraversalOverTCP: request targets a browser or client library would
// clean, sent as they are: nothing outside the view answers, and no
// target is a 5xx.
func TestTraversalOverTCP(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	addr := listen(t, s)
	secret := filepath.Join(filepath.Dir(fx.path), "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("the host's secret"), 0o600))
	for _, target := range []string{
		"/../secret.txt", "/../../../../etc/passwd", "/zs/../../secret.txt", "/%2e%2e/secret.txt",
		"/%2e%2e%2fsecret.txt", "/..%5csecret.txt", "//etc/passwd", "/./.zgroup", "/zs/.zarray/..",
		"/" + fx.path, "/secret.txt", "/zs%00/.zarray", "*", "http://x/../etc/passwd",
		"/__scc/../../etc/passwd", "/__scc/..%2fweb.go", "/__scc/%2e%2e/app.js", "/__scc//app.js",
		"/__scc/slice.png?ds=../../etc/passwd", "/__scc/slice.png?ds=%00",
	} {
		st, body := raw(t, addr, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		code := strings.Fields(st)
		require.GreaterOrEqual(t, len(code), 2, "%s: %q", target, st)
		assert.Regexp(t, `^4\d\d$`, code[1], "%s: %s", target, st)
		assert.NotContains(t, body, "secret")
		assert.NotContains(t, body, "root:")
	}
}

// TestPerClientBound: one address gets at most MaxPerClient requests in
// flight; the others are 503 while they run.
func TestPerClientBound(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{MaxPerClient: 1})
	// Hold the one slot of 192.0.2.1: a request waiting for the bytes
	// of a chunk served decoded.
	s.bytes.Acquire(bg, s.maxBytes)
	done := make(chan int)
	go func() {
		r := httptestRequest("/sp/0.0", "192.0.2.1:1000")
		w := newRecorder()
		s.ServeHTTP(w, r)
		done <- w.Code
	}()
	require.Eventually(t, func() bool {
		s.perClientMu.Lock()
		defer s.perClientMu.Unlock()
		return s.perClient["192.0.2.1"] == 1
	}, time.Minute, time.Millisecond)
	w := newRecorder()
	s.ServeHTTP(w, httptestRequest("/.zgroup", "192.0.2.1:1001"))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "a second request of the same address")
	w = newRecorder()
	s.ServeHTTP(w, httptestRequest("/.zgroup", "192.0.2.2:1000"))
	assert.Equal(t, http.StatusOK, w.Code, "another address")
	s.bytes.Release(s.maxBytes)
	assert.Equal(t, http.StatusOK, <-done)
	w = newRecorder()
	s.ServeHTTP(w, httptestRequest("/.zgroup", "192.0.2.1:1002"))
	assert.Equal(t, http.StatusOK, w.Code, "the slot is free again")
}

// replacedFile writes a file at path with dataset "d" (one chunk of
// value v) and, when extra is set, dataset extra; commits makes it commit
// that many times (its generation).
func replacedFile(t *testing.T, path string, v byte, extra string, commits int) []byte {
	t.Helper()
	// Not testfile.Create: the file is renamed or replaced, not kept.
	f, err := engine.Create(context.Background(), path, nil)
	require.NoError(t, err)
	ds, err := f.CreateDataset(context.Background(), "d", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4096}, Chunk: []uint64{4096}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	data := bytes.Repeat([]byte{v, v + 1, v + 2}, 4096/3+1)[:4096]
	require.NoError(t, ds.Write(bg, engine.All([]uint64{4096}), data))
	if extra != "" {
		_, err := f.CreateDataset(context.Background(), extra, engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
		require.NoError(t, err)
	}
	for i := 0; i < commits; i++ {
		require.NoError(t, f.SetAttr(bg, "n", engine.ScalarAttr(int64(i))))
		require.NoError(t, f.Flush(bg))
	}
	require.NoError(t, f.Close(context.Background()))
	return data
}

// served reads the decoded chunk of d as a reader would (zstd only).
func servedD(t *testing.T, s http.Handler) (int, []byte) {
	t.Helper()
	w := get(s, "GET", "/d/0")
	if w.Code != http.StatusOK {
		return w.Code, nil
	}
	dec, err := zstdDecode(w.Body.Bytes())
	require.NoError(t, err)
	return w.Code, dec
}

// TestFileReplacedRenamed: a writer that creates the file anew and
// renames it over the served path: the server opens the new file and
// serves it (its data and its datasets), and closes the old one.
func TestFileReplacedRenamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.scc")
	a := replacedFile(t, path, 1, "", 1)
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(context.Background())
	s, err := New(bg, f, Options{Path: path, Refresh: -1, Logger: quiet()})
	require.NoError(t, err)
	defer s.Close()
	code, got := servedD(t, s)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, a, got)

	b := replacedFile(t, filepath.Join(dir, "new.scc"), 50, "only_b", 1)
	require.NoError(t, os.Rename(filepath.Join(dir, "new.scc"), path))
	require.NoError(t, s.Refresh(bg))
	code, got = servedD(t, s)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, b, got, "the new file's chunk")
	getJSON(t, s, "only_b/.zarray")
	first := s.f
	assert.NotSame(t, f, first)

	// And again: the file opened by the server is closed once replaced.
	c := replacedFile(t, filepath.Join(dir, "new.scc"), 90, "", 1)
	require.NoError(t, os.Rename(filepath.Join(dir, "new.scc"), path))
	require.NoError(t, s.Refresh(bg))
	_, got = servedD(t, s)
	assert.Equal(t, c, got)
	assert.Equal(t, http.StatusNotFound, get(s, "GET", "/only_b/.zarray").Code)
	assert.ErrorIs(t, first.Refresh(bg), engine.ErrClosed, "the replaced file the server opened is closed")
	// The caller's file stays open (its Refresh reports the replacement).
	err = f.Refresh(bg)
	assert.NotErrorIs(t, err, engine.ErrClosed, "the caller's file is the caller's to close")
	assert.ErrorIs(t, err, engine.ErrCorrupt)
}

// TestFileReplacedInPlace: a writer that creates the file anew at the same
// path (truncating it): whether the new file has committed more often
// than the old one (a refresh finds another file identity) or less (a
// read finds the old chunk's bytes gone), the server ends up serving the
// new file, and meanwhile answers either file's bytes, 404 or 5xx, never
// wrong bytes.
func TestFileReplacedInPlace(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old, fresh int
	}{{"newer", 1, 6}, {"older", 6, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.scc")
			a := replacedFile(t, path, 1, "", tc.old)
			f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
			require.NoError(t, err)
			defer f.Close(context.Background())
			s, err := New(bg, f, Options{Path: path, Refresh: -1, Logger: quiet()})
			require.NoError(t, err)
			defer s.Close()
			_, got := servedD(t, s)
			require.Equal(t, a, got)
			b := replacedFile(t, path, 50, "", tc.fresh)
			for try := 0; ; try++ {
				s.Refresh(bg) // may fail while the old file is followed
				code, got := servedD(t, s)
				if code == http.StatusOK && bytes.Equal(got, b) {
					break
				}
				switch code {
				case http.StatusOK:
					require.Equal(t, a, got, "the old file's bytes or the new one's")
				case http.StatusNotFound, http.StatusInternalServerError, http.StatusServiceUnavailable:
				default:
					t.Fatalf("answered %d", code)
				}
				require.Less(t, try, 5, "the new file is never served")
			}
		})
	}
}

func zstdDecode(b []byte) ([]byte, error) {
	d, err := zstd.NewReader(nil)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.DecodeAll(b, nil)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func httptestRequest(target, remote string) *http.Request {
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = remote
	return r
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
