package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/serve"
	"github.com/scc-dev/scc/vfd/s3"
)

func init() {
	register("serve", "serve a file live over HTTP as a read-only Zarr v2 or v3 store (zarr-python, xarray, zarrita read it while it is written)", cmdServe)
}

// shutdownGrace is how long a stopped server lets requests in flight
// finish before it closes their connections.
const shutdownGrace = 10 * time.Second

// cmdServe serves FILE until SIGINT or SIGTERM, then stops accepting
// connections, lets the requests in flight finish (Server.Shutdown) and
// closes the file.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "[--addr HOST:PORT] [--format zarr2|zarr3] [--token T] [--insecure] FILE\n\n"+
		"Serves FILE read-only as a Zarr store at http://HOST:PORT/, following its writer:\n"+
		"a frame the writer Flushes is served within about 10 ms (a background loop follows\n"+
		"the writer; --refresh D refreshes lazily instead, before a request when the last\n"+
		"refresh is older than D). Open it with, for example,\n"+
		"zarr.open_consolidated(fsspec.get_mapper(URL)) (zarr2) or zarrita's FetchStore (zarr3).\n"+
		"The same URL in a browser shows the file's tree, statistics and a slice viewer.\n"+
		"An address other than loopback needs --token (clients send Authorization: Bearer T,\n"+
		"or ?token=T) or --insecure. The token may also come from SCCTL_SERVE_TOKEN, which\n"+
		"keeps it out of the process list.\n\n"+fileHelp, stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	format := fs.String("format", "zarr2", "store format: zarr2 or zarr3")
	token := fs.String("token", "", "require this bearer token of every request (default $SCCTL_SERVE_TOKEN)")
	insecure := fs.Bool("insecure", false, "allow a non-loopback --addr without a token")
	refresh := fs.Duration("refresh", 0, "refresh lazily, at most this often, instead of following the writer (0: follow)")
	maxReq := fs.Int("max-requests", 64, "requests served at once; more are answered 503")
	maxClient := fs.Int("max-per-client", 0, "requests of one client address served at once (0: --max-requests)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	var v int
	switch *format {
	case "zarr2":
		v = 2
	case "zarr3":
		v = 3
	default:
		return usageErr("--format %q: want zarr2 or zarr3", *format)
	}
	if *token == "" {
		*token = os.Getenv("SCCTL_SERVE_TOKEN")
	}
	if *refresh < 0 {
		return usageErr("--refresh %v: want 0 (follow the writer) or a positive duration", *refresh)
	}
	if *maxReq < 1 {
		return usageErr("--max-requests %d: want at least 1", *maxReq)
	}
	if *maxClient < 0 {
		return usageErr("--max-per-client %d: want 0 or more", *maxClient)
	}
	if err := serve.CheckAddr(*addr, *token, *insecure); err != nil {
		return usageErr("--addr %s: %v; give --token (or --insecure to serve without one)", *addr, err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, done, err := openPath(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer done()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	o := serve.Options{Format: v, Token: *token, Refresh: *refresh, MaxInFlight: *maxReq, MaxPerClient: *maxClient, Logger: log}
	if !s3.IsURL(path) {
		// A local file replaced under the server (created anew and
		// renamed into place, or in place) is opened again.
		o.Path = path
	}
	h, err := serve.New(ctx, f, o)
	if err != nil {
		return err
	}
	defer h.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := serve.NewHTTPServer(*addr, h)
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving %s as a Zarr v%d store at http://%s/\n", path, v, ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
