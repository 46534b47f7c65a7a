//go:build !race

package jetstream

const raceEnabled = false
