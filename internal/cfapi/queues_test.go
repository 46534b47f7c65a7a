package cfapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/server"
)

// TestQueues: list (configured queues included, with result_info), create, get, update, edit
// and delete, with stable 32-hex ids.
func TestQueues(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{
		Permissions: host.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
	})
	id := e.create("api-made")
	if id != cfapi.QueueID("api-made") || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("queue_id %q, want 32 lowercase hex characters, the queue's own", id)
	}

	page, err := e.q.List(e.ctx, queues.QueueListParams{AccountID: acc})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range page.Result {
		names = append(names, q.QueueName)
		if q.QueueID != cfapi.QueueID(q.QueueName) {
			t.Errorf("queue %s has id %s", q.QueueName, q.QueueID)
		}
	}
	if !slices.Equal(names, []string{"api-made", "tasks"}) {
		t.Errorf("listed %v, want the queue made over the API and the configured one", names)
	}
	for _, q := range page.Result {
		if q.QueueName == "tasks" && (q.ProducersTotalCount != 1 || q.Producers[0].Type != "worker") {
			t.Errorf("the configured queue's producers: %+v", q.Producers)
		}
	}
	// result_info, which the SDK's single page does not read.
	status, body := e.raw("GET", "/accounts/"+account+"/queues?per_page=1&page=2", "Bearer "+token, "")
	if status != 200 || !strings.Contains(body, `"result_info":{"page":2,"per_page":1,"count":1,"total_count":2,"total_pages":2}`) ||
		!strings.Contains(body, `"queue_name":"tasks"`) {
		t.Errorf("page 2 of 1: %d %s", status, body)
	}

	got, err := e.q.Get(e.ctx, id, queues.QueueGetParams{AccountID: acc})
	if err != nil || got.QueueName != "api-made" || got.Settings.MessageRetentionPeriod != 345600 || got.CreatedOn == "" {
		t.Fatalf("get: %+v, %v", got, err)
	}

	// PATCH changes what it names, and nothing else.
	edited, err := e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryDelay: cloudflare.F(30.0)})}})
	if err != nil || edited.Settings.DeliveryDelay != 30 || edited.Settings.DeliveryPaused {
		t.Fatalf("edit delivery_delay: %+v, %v", edited.Settings, err)
	}
	edited, err = e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryPaused: cloudflare.F(true)})}})
	if err != nil || edited.Settings.DeliveryDelay != 30 || !edited.Settings.DeliveryPaused || !e.stats("api-made").Paused {
		t.Fatalf("edit delivery_paused: %+v, %v", edited.Settings, err)
	}
	// PUT replaces the whole configuration: what it leaves out is reset.
	updated, err := e.q.Update(e.ctx, id, queues.QueueUpdateParams{AccountID: acc, Queue: queues.QueueParam{
		QueueName: cloudflare.F("api-made"), Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryDelay: cloudflare.F(5.0)})}})
	if err != nil || updated.Settings.DeliveryDelay != 5 || updated.Settings.DeliveryPaused {
		t.Fatalf("update: %+v, %v", updated.Settings, err)
	}
	eventually(t, 10*time.Second, "the queue resumed", func() bool { return !e.stats("api-made").Paused })
	if updated.ModifiedOn < updated.CreatedOn {
		t.Errorf("modified_on %s before created_on %s", updated.ModifiedOn, updated.CreatedOn)
	}
	// The platform's retention is every queue's; another cannot be set.
	_, err = e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{MessageRetentionPeriod: cloudflare.F(60.0)})}})
	wantAPIErr(t, err, http.StatusBadRequest, 10207)
	_, err = e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryDelay: cloudflare.F(86401.0)})}})
	wantAPIErr(t, err, http.StatusBadRequest, 10207)

	// A name taken, a bad name.
	_, err = e.q.New(e.ctx, queues.QueueNewParams{AccountID: acc, QueueName: cloudflare.F("api-made")})
	wantAPIErr(t, err, http.StatusConflict, 11009)
	_, err = e.q.New(e.ctx, queues.QueueNewParams{AccountID: acc, QueueName: cloudflare.F("Bad_Name")})
	wantAPIErr(t, err, http.StatusBadRequest, 10207)

	// Delete: gone, and its id is unknown; a configured queue stays.
	if _, err := e.q.Delete(e.ctx, id, queues.QueueDeleteParams{AccountID: acc}); err != nil {
		t.Fatal(err)
	}
	_, err = e.q.Get(e.ctx, id, queues.QueueGetParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusNotFound, 10104)
	_, err = e.q.Delete(e.ctx, cfapi.QueueID("tasks"), queues.QueueDeleteParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusConflict, 10254)
	// A queue made again has the same id.
	if again := e.create("api-made"); again != id {
		t.Errorf("made again: id %s, want %s", again, id)
	}
}

// TestAuthAndRoutes: without the bearer token, 403 with Cloudflare's code 10000; malformed
// and unknown ids; unknown routes.
func TestAuthAndRoutes(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	list := "/accounts/" + account + "/queues"
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, token} {
		status, body := e.raw("GET", list, auth, "")
		if status != http.StatusForbidden || body != `{"success":false,"errors":[{"code":10000,"message":"Authentication error"}],"messages":[],"result":null}` {
			t.Errorf("Authorization %q: %d %s", auth, status, body)
		}
	}
	// The SDK with a wrong token.
	_, err := e.client(0, optionToken("nope")).List(e.ctx, queues.QueueListParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusForbidden, 10000)

	_, err = e.q.Get(e.ctx, "not-an-id", queues.QueueGetParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusBadRequest, 10107)
	_, err = e.q.Get(e.ctx, strings.Repeat("0", 32), queues.QueueGetParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusNotFound, 10104)
	status, body := e.raw("GET", "/accounts/another/queues", "Bearer "+token, "")
	if status != http.StatusNotFound || !strings.Contains(body, `"code":7003`) {
		t.Errorf("another account: %d %s", status, body)
	}
	status, body = e.raw("POST", list, "Bearer "+token, `{"queue_name":`)
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":10208`) {
		t.Errorf("malformed body: %d %s", status, body)
	}
	status, body = e.raw("POST", list, "Bearer "+token, `["q"]`)
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":10207`) {
		t.Errorf("a body that is no object: %d %s", status, body)
	}
	// Field names are case-sensitive, as in JavaScript.
	status, body = e.raw("POST", list, "Bearer "+token, `{"Queue_Name":"q"}`)
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":10207`) {
		t.Errorf("Queue_Name: %d %s", status, body)
	}
}
