// Package s3test runs a real MinIO server for the S3 driver's tests and
// benchmarks, and a fault-injecting HTTP proxy on loopback in front of it.
// Nothing here imitates S3: every request reaches the MinIO binary built by
// `make minio` (vfd/s3/testdata/build-minio.sh).
//
// A Server and a Proxy are safe for concurrent use.
package s3test

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

//go:embed minio-version
var version string

// Version is the pinned MinIO module version (a pseudo-version).
func Version() string { return strings.TrimSpace(version) }

// Credentials of every Server this package starts.
const (
	AccessKey = "scc-test-access"
	SecretKey = "scc-test-secret-key"
)

// ErrNoBinary: the MinIO binary is not built. The message names the make
// target that builds it.
var ErrNoBinary = errors.New("s3test: MinIO binary missing: run `make minio` (vfd/s3/testdata/build-minio.sh)")

// Binary returns the path of the built MinIO server: $SCC_MINIO_BIN, else
// minio in $SCC_MINIO_DIR, else in ~/.cache/scc/minio-<Version>, as the
// build script puts it.
func Binary() (string, error) {
	if p := os.Getenv("SCC_MINIO_BIN"); p != "" {
		return p, nil
	}
	dir := os.Getenv("SCC_MINIO_DIR")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("%w: %w", ErrNoBinary, err)
			}
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "scc", "minio-"+Version())
	}
	p := filepath.Join(dir, "minio")
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w (looked for %s)", ErrNoBinary, p)
	}
	return p, nil
}

// Server is one MinIO process on 127.0.0.1 with its own data directory.
type Server struct {
	bin, dir, addr, console string

	mu struct {
		sync.Mutex
		cmd  *exec.Cmd
		done chan struct{} // closed when cmd exits
	}
}

// Start starts MinIO on free loopback ports with data in dir and waits
// until it is ready.
func Start(dir string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return StartAt(dir, addr)
}

// StartAt is Start on a given address (host:port); the console takes a
// free port.
func StartAt(dir, addr string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	console, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, addr: addr, console: console}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Endpoint is the server's host:port.
func (s *Server) Endpoint() string { return s.addr }

// Restart starts the server again (after Kill or Stop) on the same address
// and data directory, and waits until it is ready.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd != nil {
		return errors.New("s3test: server already running")
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "..", filepath.Base(s.dir)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", s.dir, "--address", s.addr, "--console-address", s.console, "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("s3test: starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	s.mu.cmd, s.mu.done = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			s.mu.cmd = nil
			return fmt.Errorf("s3test: MinIO exited during startup; see %s.log", s.dir)
		default:
		}
		resp, err := http.Get("http://" + s.addr + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stopLocked(syscall.SIGKILL)
	return errors.New("s3test: MinIO not ready after 60s")
}

// Kill stops the server abruptly (SIGKILL), as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGKILL)
}

// Stop stops the server gracefully. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGTERM)
}

func (s *Server) stopLocked(sig syscall.Signal) {
	if s.mu.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.mu.cmd.Process.Pid, sig)
	select {
	case <-s.mu.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.mu.cmd.Process.Pid, syscall.SIGKILL)
		<-s.mu.done
	}
	s.mu.cmd = nil
}

// Client returns a minio-go client for endpoint (the server's, or a proxy's).
func Client(endpoint string) (*minio.Client, error) {
	return minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1"})
}

// MakeBucket creates a bucket on the server.
func (s *Server) MakeBucket(ctx context.Context, name string) error {
	c, err := Client(s.addr)
	if err != nil {
		return err
	}
	return c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: "us-east-1"})
}
