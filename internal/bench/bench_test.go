package bench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[int]time.Duration{50: 100 * time.Millisecond, 90: 180 * time.Millisecond, 99: 198 * time.Millisecond, 100: 200 * time.Millisecond} {
		if got := Percentile(ds, p); got != want {
			t.Errorf("p%d = %v, want %v", p, got, want)
		}
	}
	if got := Percentile(ds[:1], 99); got != time.Millisecond {
		t.Errorf("p99 of one = %v", got)
	}
}
