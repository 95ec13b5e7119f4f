//go:build !unix

package bench

// syncAll is a no-op where sync(2) is not available.
func syncAll() {}
