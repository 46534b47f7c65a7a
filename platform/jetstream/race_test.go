//go:build race

package jetstream

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = true
