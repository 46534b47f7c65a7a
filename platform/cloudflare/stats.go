package cloudflare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/duilie/duilie/platform"
)

var _ platform.Stater = (*Platform)(nil)

// Stats reports what Cloudflare reports of each of the account's queues, sorted by name:
// whether its delivery is paused, and its backlog (the messages not yet acknowledged, ready,
// delayed and leased together, from GET …/queues/{id}/metrics). Cloudflare does not tell ready,
// delayed and in-flight messages apart, so those are not reported.
func (p *Platform) Stats(ctx context.Context) ([]platform.QueueStats, error) {
	qs, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]platform.QueueStats, 0, len(qs))
	for _, q := range qs {
		n, err := p.backlog(ctx, q.QueueID)
		if err != nil {
			return nil, fmt.Errorf("metrics of queue %s: %w", q.QueueName, err)
		}
		out = append(out, platform.QueueStats{Queue: q.QueueName, Paused: q.Settings.DeliveryPaused, Backlog: &n})
	}
	slices.SortFunc(out, func(a, b platform.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// backlog asks Cloudflare for a queue's best-effort metrics. The SDK this driver uses predates
// the endpoint, so it is one plain request.
func (p *Platform) backlog(ctx context.Context, id string) (int64, error) {
	u := strings.TrimSuffix(p.cfg.BaseURL, "/") + "/accounts/" + p.cfg.AccountID + "/queues/" + id + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+p.cfg.Token)
	res, err := p.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var env struct {
		Errors []errorEntry `json:"errors"`
		Result struct {
			BacklogCount float64 `json:"backlog_count"`
		} `json:"result"`
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(body, &env); err != nil && res.StatusCode < 400 {
		return 0, fmt.Errorf("metrics: not Cloudflare's envelope: %w", err)
	}
	if res.StatusCode >= 400 {
		return 0, newAPIError(res.StatusCode, env.Errors, res.Header)
	}
	return int64(env.Result.BacklogCount), nil
}
