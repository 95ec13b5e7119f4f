//go:build !unix

package bench

// settleWriteback is a no-op where sync(2) is not available.
func settleWriteback() {}
