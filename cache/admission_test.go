package cache

import "testing"

type fakeAdmission struct{ capacity []int64 }

func (f *fakeAdmission) SetCapacity(n int64) { f.capacity = append(f.capacity, n) }

// TestAdmissionOnePerCache: every caller gets the first Admission, made
// with the active limit, and a limit change reaches it.
func TestAdmissionOnePerCache(t *testing.T) {
	c, err := New(Config{QuiescentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.admission.limitChanged(&c.sizes) // nothing to tell yet
	var made []int64
	create := func(limit int64) Admission {
		made = append(made, limit)
		return &fakeAdmission{}
	}
	a := c.Admission(create)
	if b := c.Admission(create); b != a {
		t.Fatal("second Admission call returned another value")
	}
	if len(made) != 1 || made[0] != c.Stats().ActiveLimit {
		t.Fatalf("create calls %v, want one with the active limit %d", made, c.Stats().ActiveLimit)
	}
	cfg := c.Config()
	cfg.QuiescentBytes *= 2
	if err := c.SetConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := a.(*fakeAdmission).capacity, c.Stats().ActiveLimit; len(got) != 1 || got[0] != want || want != 4<<20 {
		t.Fatalf("SetCapacity calls %v, want [%d]", got, want)
	}
}
