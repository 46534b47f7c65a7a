package bridge

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
)

// repeatReader yields prefix, then n copies of fill, then suffix, without holding them.
type repeatReader struct {
	prefix, suffix string
	fill           byte
	n              int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		switch {
		case r.prefix != "":
			k := copy(p, r.prefix)
			r.prefix, p, written = r.prefix[k:], p[k:], written+k
		case r.n > 0:
			k := min(len(p), r.n)
			for i := range k {
				p[i] = r.fill
			}
			r.n, p, written = r.n-k, p[k:], written+k
		case r.suffix != "":
			k := copy(p, r.suffix)
			r.suffix, p, written = r.suffix[k:], p[k:], written+k
		default:
			if written == 0 {
				return 0, io.EOF
			}
			return written, nil
		}
	}
	return written, nil
}

func (r *repeatReader) size() int64 { return int64(len(r.prefix) + r.n + len(r.suffix)) }

// postStream makes a bridge call whose body is streamed from r.
func postStream(t *testing.T, url string, r *repeatReader) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = r.size()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// retainedHeap is the heap memory the Go runtime holds from the OS.
func retainedHeap() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapSys - ms.HeapReleased
}

// TestDeepCallNotHeld: 30 MB of nested brackets is refused as soon as it nests deeper than a
// call can, before it is read: the bridge allocates next to nothing for it, where a parser
// would have taken hundreds of megabytes (about 90 B a level).
func TestDeepCallNotHeld(t *testing.T) {
	_, err := inProcess(t, 1, func(ev *duilie.Event, url string, aborts *atomic.Int32) error {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		status, text := postStream(t, url, &repeatReader{fill: '[', n: 30 << 20})
		runtime.ReadMemStats(&after)
		if want := event.BadCall.Reason + badDeep; status != 500 || text != want {
			t.Errorf("reply %d %q, want 500 %q", status, text, want)
		}
		// The client and the server share this process: both count. A held call alone is 30 MB.
		grown := after.TotalAlloc - before.TotalAlloc
		t.Logf("the call allocated %d KiB", grown>>10)
		if grown > 4<<20 {
			t.Errorf("the call allocated %d MiB", grown>>20)
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), badDeep) {
		t.Errorf("event failure %v", err)
	}
}

// TestLargeCallLeavesNoHeap: a flat 50 MB call (a body far over the interface's limit, which
// the interface refuses with its own exception) leaves no grown heap behind once answered.
func TestLargeCallLeavesNoHeap(t *testing.T) {
	_, err := inProcess(t, 1, func(ev *duilie.Event, url string, aborts *atomic.Int32) error {
		runtime.GC()
		before := retainedHeap()
		status, text := postStream(t, url, &repeatReader{prefix: `["发送队列消息","Q","`, fill: 'x', n: 50 << 20, suffix: `",0]`})
		if status != 400 || text != "消息体超过 128000 字节" {
			t.Errorf("reply %d %q", status, text)
		}
		deadline := time.Now().Add(10 * time.Second)
		defer func() {
			t.Logf("heap held from the system: %d MiB before the call, %d MiB after", before>>20, retainedHeap()>>20)
		}()
		for retainedHeap() > before+16<<20 {
			if time.Now().After(deadline) {
				t.Fatalf("the heap held %d MiB before the call and %d MiB 10 s after it", before>>20, retainedHeap()>>20)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// A fetch event's body of the largest size is read into one buffer of its declared length:
// 16 MiB allocated for it, not the 2–3 times that a buffer grown as the body arrives leaves
// behind, with max_fetch_concurrency requests at once. A body without a length, or one longer
// than it claims, is still read whole or refused at the limit.
func TestFetchBodyAllocation(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n             int
		contentLength int64
		wantErr       bool
	}{
		{"declared", MaxRequestBytes, MaxRequestBytes, false},
		{"chunked", 3 << 20, -1, false},
		{"over the limit", MaxRequestBytes + 1, -1, true},
	} {
		body := &repeatReader{fill: 'x', n: tc.n}
		req := httptestRequest(t, body, tc.contentLength)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := readBody(nopWriter{}, req)
		runtime.ReadMemStats(&after)
		if (err != nil) != tc.wantErr || (!tc.wantErr && len(got) != tc.n) {
			t.Errorf("%s: read %d bytes, err %v", tc.name, len(got), err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; tc.name == "declared" && alloc > MaxRequestBytes+1<<20 {
			t.Errorf("%s: %d MiB allocated to read a 16 MiB body", tc.name, alloc>>20)
		}
	}
}

func httptestRequest(t *testing.T, body io.Reader, contentLength int64) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", "http://x/", io.NopCloser(body))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = contentLength
	return req
}

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}
