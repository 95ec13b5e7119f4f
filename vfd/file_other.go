//go:build !linux

package vfd

// Without a tested preadv/pwritev binding, vector I/O is one pread/pwrite per
// extent: the same results, more system calls.

func (f *File) readV(sorted []Extent) error  { return f.readVLoop(sorted) }
func (f *File) writeV(sorted []Extent) error { return f.writeVLoop(sorted) }

// startWriteBack does nothing: write-behind (SetWriteBehind) is a Linux
// hint.
func (f *File) startWriteBack() error { return nil }
