package s3

import (
	"testing"

	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// The engine-over-S3 tests are package s3_test: they import the engine,
// which imports this package. These are the test helpers they share.
var (
	TestKey  = testKey
	TestOpts = testOpts
	OpenT    = openT
	CreateT  = createT
	NewProxy = newProxy
	// ChildMain, set by package s3_test, runs a child process that a test
	// started this binary as, when the environment asks for one (ok).
	ChildMain func() (code int, ok bool)
)

const TestBucket = testBucket

// Server is the MinIO server TestMain started.
func Server() *s3test.Server { return testServer }

var _ = testing.Short

const DefaultHeadSize = defaultHeadSize
