package s3test

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the Proxy does to one request.
type Fault struct {
	// Delay is added before the request is forwarded.
	Delay time.Duration
	// Status, when non-zero, answers the request with this status and an
	// S3 error document of Code instead of forwarding it (503 SlowDown,
	// 500 InternalError, ...).
	Status int
	Code   string
	// Drop closes the client's connection without an answer (a network
	// failure), before forwarding.
	Drop bool
	// DropAfter forwards the request and then closes the connection
	// without relaying the answer: the server acted, the client never
	// learns it (a lost answer).
	DropAfter bool
}

// Proxy is an HTTP reverse proxy on 127.0.0.1 in front of a Server that
// delays or fails requests. S3 signatures cover the Host header, which the
// proxy passes through unchanged, so clients sign for the proxy's address.
type Proxy struct {
	addr  string
	srv   *http.Server
	ln    net.Listener
	rp    *httputil.ReverseProxy
	count atomic.Int64 // requests seen
	// active counts requests being served; maxActive is its high-water
	// mark since the last ResetMaxActive.
	active, maxActive atomic.Int64

	latency atomic.Int64 // nanoseconds added to every request
	mu      struct {
		sync.Mutex
		fault func(n int64, r *http.Request) Fault // nil: no faults
	}
}

// NewProxy starts a proxy forwarding to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &url.URL{Scheme: "http", Host: target}
	p := &Proxy{addr: ln.Addr().String(), ln: ln, rp: httputil.NewSingleHostReverseProxy(u)}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	p.rp.Transport = tr
	p.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		// The server is down: the client sees a dropped connection, as
		// it would talking to the server directly.
		hijackClose(w)
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go p.srv.Serve(ln)
	return p, nil
}

// Endpoint is the proxy's host:port, for clients.
func (p *Proxy) Endpoint() string { return p.addr }

// Requests reports how many requests reached the proxy.
func (p *Proxy) Requests() int64 { return p.count.Load() }

// SetLatency adds d to every request.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetFault installs fn, called with each request's sequence number (from
// 1) and the request; nil removes it.
func (p *Proxy) SetFault(fn func(n int64, r *http.Request) Fault) {
	p.mu.Lock()
	p.mu.fault = fn
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// MaxActive reports the most requests served at once since the last
// ResetMaxActive.
func (p *Proxy) MaxActive() int64 { return p.maxActive.Load() }

// ResetMaxActive starts MaxActive afresh.
func (p *Proxy) ResetMaxActive() { p.maxActive.Store(0) }

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	n := p.count.Add(1)
	a := p.active.Add(1)
	defer p.active.Add(-1)
	for m := p.maxActive.Load(); a > m && !p.maxActive.CompareAndSwap(m, a); m = p.maxActive.Load() {
	}
	p.mu.Lock()
	fn := p.mu.fault
	p.mu.Unlock()
	var f Fault
	if fn != nil {
		f = fn(n, r)
	}
	if d := time.Duration(p.latency.Load()) + f.Delay; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case f.Drop:
		hijackClose(w)
		return
	case f.Status != 0:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + f.Code +
			`</Code><Message>injected by s3test.Proxy</Message><Resource>` + r.URL.Path + `</Resource></Error>`))
		return
	case f.DropAfter:
		p.rp.ServeHTTP(discard{h: http.Header{}}, r)
		hijackClose(w)
		return
	}
	p.rp.ServeHTTP(w, r)
}

func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// discard is a ResponseWriter that drops the answer.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
