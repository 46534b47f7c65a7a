// Command recorder is [app] command of the cluster tests (cluster_e2e_test.go): a queue event
// reads its batch over the bridge and appends to $CLUSTER_APP_LOG, in one write, one line per
// message, "m <serve> <n> <id> <attempts>", then "e <serve> <start ns> <end ns>" for the
// event. It sleeps $CLUSTER_APP_SLEEP_BEFORE_MS before reading (a serve killed meanwhile takes
// its bridge along: nothing is recorded) and $CLUSTER_APP_SLEEP_MS between reading and
// writing, and exits 0: every message is done. A program of its own, not the test binary, so that an event costs what a
// small program costs (the test binary takes about 15 ms of CPU to start).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() { os.Exit(run()) }

func run() int {
	start := time.Now()
	serve := os.Getenv("CLUSTER_SERVE")
	if ms, _ := strconv.Atoi(os.Getenv("CLUSTER_APP_SLEEP_BEFORE_MS")); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	resp, err := http.Post(os.Getenv("DUILIE_BRIDGE"), "application/json", strings.NewReader(`["读取队列批次"]`))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 11
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		fmt.Fprintf(os.Stderr, "read batch: %d %s\n", resp.StatusCode, text)
		return 13
	}
	var batch struct {
		Messages []struct {
			ID       string `json:"id"`
			Attempts int    `json:"attempts"`
			Body     struct {
				N int `json:"n"`
			} `json:"body"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(text, &batch); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 14
	}
	if ms, _ := strconv.Atoi(os.Getenv("CLUSTER_APP_SLEEP_MS")); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	var b strings.Builder
	for _, m := range batch.Messages {
		fmt.Fprintf(&b, "m %s %d %s %d\n", serve, m.Body.N, m.ID, m.Attempts)
	}
	fmt.Fprintf(&b, "e %s %d %d\n", serve, start.UnixNano(), time.Now().UnixNano())
	f, err := os.OpenFile(os.Getenv("CLUSTER_APP_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 15
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 15
	}
	return 0
}
