//go:build !unix

package cli

import "time"

func cpuTime() time.Duration { return 0 }

func ownPeakRSS() int64 { return 0 }
