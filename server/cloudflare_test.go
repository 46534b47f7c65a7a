package server

import (
	"context"
	"slices"
	"testing"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// TestDeliveryDelays: a queue's delivery delay delays what is sent without a delay of its own,
// in a send and in each item of a batch; an explicit delay is kept; other queues are untouched.
func TestDeliveryDelays(t *testing.T) {
	mp := memory.New(memory.Options{Record: true})
	p := delaying{mp, newDeliveryDelays(map[string]int{"slow": 60})}
	ctx := context.Background()
	slow, _ := p.Queue(ctx, "slow")
	fast, _ := p.Queue(ctx, "fast")
	json := platform.SendOptions{ContentType: platform.JSON}
	slow.Send(ctx, []byte(`1`), json)
	slow.Send(ctx, []byte(`2`), platform.SendOptions{ContentType: platform.JSON, DelaySeconds: 5})
	slow.SendBatch(ctx, []platform.BatchItem{{Body: []byte(`3`), ContentType: platform.JSON}, {Body: []byte(`4`), ContentType: platform.JSON, DelaySeconds: 7}})
	fast.Send(ctx, []byte(`5`), json)
	var got []string
	for _, c := range mp.Calls() {
		got = append(got, c.String())
	}
	want := []string{
		`send(1, {"contentType":"json","delaySeconds":60})`,
		`send(2, {"contentType":"json","delaySeconds":5})`,
		`sendBatch([{"body":3,"contentType":"json","delaySeconds":60},{"body":4,"contentType":"json","delaySeconds":7}])`,
		`send(5, {"contentType":"json"})`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls\n%q\nwant\n%q", got, want)
	}
}

// TestCloudflareAPIToken: a serve of the API needs its token's variable set.
func TestCloudflareAPIToken(t *testing.T) {
	t.Setenv("DUILIE_TEST_EMPTY_TOKEN", "")
	_, err := New(Config{Platform: &memory.Config{}, CloudflareAPI: CloudflareAPI{Listen: "127.0.0.1:0", AccountID: "a", TokenEnv: "DUILIE_TEST_EMPTY_TOKEN"}})
	if err == nil || err.Error() != "CloudflareAPI.TokenEnv = \"DUILIE_TEST_EMPTY_TOKEN\": names an environment variable that is unset or empty; set it to the API's bearer token" {
		t.Errorf("New: %v", err)
	}
	_, err = New(Config{Platform: &memory.Config{}, CloudflareAPI: CloudflareAPI{PullConsumers: []PullConsumer{DefaultPullConsumer("q")}}})
	if err == nil || err.Error() != "CloudflareAPI.Listen: missing; the http_pull consumers (q, …) are pulled over Cloudflare's API, which it serves" {
		t.Errorf("New: %v", err)
	}
}
