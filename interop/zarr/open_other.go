//go:build !unix

package zarr

const openFlags = 0
