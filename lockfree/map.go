package lockfree

import (
	"sync"

	"github.com/alphadose/haxmap"
	"github.com/puzpuzpuz/xsync/v3"
)

// Map is a concurrent hash map for tables with heavy insert/delete churn.
// Reads never block; writers lock only one bucket.
type Map[K comparable, V any] struct {
	m *xsync.MapOf[K, V]
}

// NewMap returns an empty Map sized for about sizeHint entries (0: default).
func NewMap[K comparable, V any](sizeHint int) *Map[K, V] {
	if sizeHint > 0 {
		return &Map[K, V]{m: xsync.NewMapOf[K, V](xsync.WithPresize(sizeHint))}
	}
	return &Map[K, V]{m: xsync.NewMapOf[K, V]()}
}

// NewMapWithHasher is NewMap with a caller-supplied hash function
// (hash(key, seed)); use it when the built-in hasher would fall back to the
// slow generic path (struct keys holding strings).
func NewMapWithHasher[K comparable, V any](hash func(K, uint64) uint64) *Map[K, V] {
	return &Map[K, V]{m: xsync.NewMapOfWithHasher[K, V](hash)}
}

// Load returns the value stored for key.
func (m *Map[K, V]) Load(key K) (V, bool) { return m.m.Load(key) }

// Store sets the value for key.
func (m *Map[K, V]) Store(key K, v V) { m.m.Store(key, v) }

// LoadOrStore returns the existing value for key if present; otherwise it
// stores v and returns it with loaded false.
func (m *Map[K, V]) LoadOrStore(key K, v V) (actual V, loaded bool) {
	return m.m.LoadOrStore(key, v)
}

// Delete removes key.
func (m *Map[K, V]) Delete(key K) { m.m.Delete(key) }

// CompareAndDelete removes key only if its value satisfies same; it reports
// whether it removed anything. It lets an owner remove its own entry without
// racing with a newer entry stored under the same key.
func (m *Map[K, V]) CompareAndDelete(key K, same func(V) bool) bool {
	deleted := false
	m.m.Compute(key, func(old V, loaded bool) (V, bool) {
		if loaded && same(old) {
			deleted = true
			return old, true
		}
		// Keep what is there; when nothing was there, delete=true stores nothing.
		return old, !loaded
	})
	return deleted
}

// Range calls f for every entry until f returns false. Entries added or
// removed during Range may or may not be visited.
func (m *Map[K, V]) Range(f func(K, V) bool) { m.m.Range(f) }

// Len reports the number of entries.
func (m *Map[K, V]) Len() int { return m.m.Size() }

// RegistryKey is the set of key types a Registry accepts.
type RegistryKey interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr | ~string
}

// Registry is a concurrent hash map for tables whose entries are rarely
// added or removed (files, datasets). Lookups are lock-free; writers are
// serialized by a mutex.
//
// Why the mutex: besides its delete bug (package comment), haxmap v1.4.0
// also loses keys when several goroutines insert while the map grows — we
// reproduced a Get missing a key right after its own GetOrSet returned, with
// 8 inserting goroutines. With one writer at a time and any number of
// readers it held up in our stress tests (TestRegistryStress), and
// registrations are rare, so serializing them costs nothing measurable.
type Registry[K RegistryKey, V any] struct {
	wmu sync.Mutex // serializes Set, GetOrSet and Del
	m   *haxmap.Map[K, V]
}

// NewRegistry returns an empty Registry.
func NewRegistry[K RegistryKey, V any]() *Registry[K, V] {
	return &Registry[K, V]{m: haxmap.New[K, V]()}
}

// Get returns the value stored for key. It takes no lock.
func (r *Registry[K, V]) Get(key K) (V, bool) { return r.m.Get(key) }

// GetOrSet returns the existing value for key if present; otherwise it
// stores v and returns it with loaded false.
func (r *Registry[K, V]) GetOrSet(key K, v V) (actual V, loaded bool) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.m.GetOrSet(key, v)
}

// Set stores v for key.
func (r *Registry[K, V]) Set(key K, v V) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.m.Set(key, v)
}

// Del removes key.
func (r *Registry[K, V]) Del(key K) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.m.Del(key)
}

// ForEach calls f for every entry until f returns false. It takes no lock;
// entries added or removed meanwhile may or may not be visited.
func (r *Registry[K, V]) ForEach(f func(K, V) bool) { r.m.ForEach(f) }

// Len reports the number of entries.
func (r *Registry[K, V]) Len() int { return int(r.m.Len()) }
