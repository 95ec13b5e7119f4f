// Package lockfree holds the concurrent building blocks of scc's shared chunk
// cache (SCC design §5.1: "use lock free hash table instead of UThash", "modify
// existing structures to use atomic values"):
//
//   - Map: a typed concurrent hash map over xsync.MapOf, for tables whose
//     entries are inserted and deleted constantly (resident chunks).
//   - Registry: a typed concurrent hash map over haxmap, for tables whose
//     entries are rarely added or removed (file and dataset registries).
//     haxmap has an open correctness bug (alphadose/haxmap issue #23: after
//     many Set/Del cycles a Get can stop finding a key), and we found it also
//     loses keys under concurrent inserts, so it is never used where keys
//     churn, and Registry serializes its writers; TestRegistryStress checks
//     exactly that usage.
//   - Counter: a striped int64 counter for hot statistics (hits, misses).
//   - Buffer: a lossy striped buffer that records accesses on the hit path so
//     that replacement-order structures can be updated in batches, by a
//     goroutine of the caller's that drains it, instead of under a lock on
//     every hit.
//
// Every type here is safe for concurrent use by any number of goroutines.
package lockfree
