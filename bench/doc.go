// Package bench measures what the idempotency runner costs per request against the naive SQL a
// user would otherwise write, on the same database, in the same process, at the same time.
//
// Each workload (a fresh key, a feature run, a replay hit) has a runner side — the kernel going
// through idem.RunPrepared — and a raw side: the same statements hand-written with pgx on the same
// pool, one statement per round trip. The two sides run alternately in short slices (ABBA order)
// until each has had half of the cell's duration, so whatever the machine does meanwhile hits both
// alike; only the ratio of the two is meant to be compared across machines and runs. Besides
// ops/s and latency percentiles, a cell reports allocations per op (runtime.MemStats deltas over
// the side's slices) and, from a separate traced pool, the round trips one op makes.
//
// The storm measures how long 1,000 same-key requests in one process (with and without in-flight
// sharing) and 400 from four processes take to resolve, against one lone request; growth repeats
// the fresh-key and replay workloads after bulk-loading realistic rows of other owners.
//
// Run writes only into the database it is given; `idemwork bench` gives it a scratch database it
// creates and drops (CreateScratch).
package bench
