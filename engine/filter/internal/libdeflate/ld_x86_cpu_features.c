//go:build cgo

// cgo compiles only this directory's own C files (doc.go).
#include "upstream/lib/x86/cpu_features.c"
