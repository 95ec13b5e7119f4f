//go:build !unix

package main

import "testing"

func makeFIFO(t *testing.T) (string, func()) {
	t.Skip("no FIFOs on this platform")
	return "", nil
}

func mkfifoAt(t *testing.T, path string) {
	t.Skip("no FIFOs on this platform")
}
