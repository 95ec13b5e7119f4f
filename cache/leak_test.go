package cache

import (
	"testing"

	"go.uber.org/goleak"
)

func TestNoGoroutineLeakAfterClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, Config{QuiescentBytes: 4 * 64, MinBytes: -1, BypassBytes: -1, Workers: 4})
	d, l := e.dataset(1, -1, 64)
	for i := 0; i < 50; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i)), fullReq(d, l, pattern(64, byte(i)), uint64(i+100))}))
	}
	must(t, e.f.Unregister(bg))
	must(t, e.c.Close())
}
