//go:build !race

package jsonb_test

const raceDetector = false
