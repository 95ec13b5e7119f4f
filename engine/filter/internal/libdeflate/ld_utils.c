//go:build cgo

// cgo compiles only this directory's own C files (doc.go).
#include "upstream/lib/utils.c"
