//go:build !unix

package zarr

import "testing"

func mkfifo(t *testing.T, path string) {
	t.Skip("no FIFOs on this platform")
}
