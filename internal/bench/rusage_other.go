//go:build !unix

package bench

import "time"

func cpuTime() time.Duration { return 0 }

func ownPeakRSS() int64 { return 0 }

func ownRSS() int64 { return 0 }
