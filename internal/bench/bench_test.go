package bench

import (
	"context"
	"io"
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

// A consumer that settles nothing while messages wait is a stall, however long it lasts; one
// that keeps settling, or has nothing to settle, is not.
func TestWatchStall(t *testing.T) {
	m := newBenchMeter()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.watch(ctx) }()
	time.Sleep(3 * stallTick) // nothing sent: no stall
	if d := m.maxStall.Load(); d != 0 {
		t.Errorf("nothing sent, stall %v", time.Duration(d))
	}
	m.sent.Add(10)
	for range 5 { // settling as it goes: no stall
		time.Sleep(stallTick / 2)
		m.settle(1)
	}
	if d := time.Duration(m.maxStall.Load()); d > 2*stallTick {
		t.Errorf("settling every %v, stall %v", stallTick/2, d)
	}
	time.Sleep(6 * stallTick) // 5 wait, none settled
	cancel()
	<-done
	if d := time.Duration(m.maxStall.Load()); d < 4*stallTick {
		t.Errorf("nothing settled for %v with 5 waiting, stall %v", 6*stallTick, d)
	}
}

// A raw run that stalls is made again; one that stalls every time is marked, not taken as a
// baseline.
func TestRawStalledAgain(t *testing.T) {
	defer func(f func(context.Context, Options, *benchClient, int, int, bool, io.Writer) (*Measurement, error)) {
		runRaw = f
	}(runRaw)
	for _, tc := range []struct {
		stalls      []float64 // each try's longest stall, s
		wantTries   int
		wantStalled bool
	}{
		{[]float64{0.1}, 1, false},
		{[]float64{29, 0.2}, 2, false},
		{[]float64{29, 30, 1.9}, 3, false},
		{[]float64{29, 30, 28, 0.1}, 3, true},
	} {
		try := 0
		runRaw = func(context.Context, Options, *benchClient, int, int, bool, io.Writer) (*Measurement, error) {
			r := &Measurement{Name: rawAsync, MaxStall: tc.stalls[try]}
			try++
			return r, nil
		}
		r, err := rawUnstalled(context.Background(), Options{}, nil, 1, 100, true, io.Discard)
		if err != nil || r.Tries != tc.wantTries || r.Stalled != tc.wantStalled || try != tc.wantTries {
			t.Errorf("stalls %v: tries %d (made %d), stalled %v, err %v; want %d tries, stalled %v",
				tc.stalls, r.Tries, try, r.Stalled, err, tc.wantTries, tc.wantStalled)
		}
	}
}
