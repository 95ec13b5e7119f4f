//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// makeFIFO creates a named pipe with no writer: opening it for reading
// blocks until one appears.
func makeFIFO(t *testing.T) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "pipe.scc")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Opening the write end (non-blocking, once a reader waits) frees a
	// command that opened the FIFO, so a failing test does not hang.
	release = func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	return path, release
}

// mkfifoAt creates a named pipe at path, with no writer.
func mkfifoAt(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}
