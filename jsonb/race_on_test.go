//go:build race

package jsonb_test

// raceDetector: the race detector's instrumentation allocates on its own, so allocation counts
// are not asserted under it.
const raceDetector = true
