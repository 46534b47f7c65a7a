// Command inproc is the cluster benchmark's Go program on duilie's host (package app): its
// queue handler runs in-process, once per batch, and records what testdata/recorder records,
// in the same format, to $CLUSTER_APP_LOG. It runs as `inproc serve --config F`, where a
// program per event would run as `duilie serve --config F`.
package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/app"
)

func main() {
	serve := os.Getenv("CLUSTER_SERVE")
	var mu sync.Mutex
	app.Main(duilie.Program{Queue: func(ev *duilie.Event) error {
		start := time.Now()
		b, err := duilie.ReadBatchOf[struct {
			N int `json:"n"`
		}](ev)
		if err != nil {
			return err
		}
		var s strings.Builder
		for _, m := range b.Messages {
			fmt.Fprintf(&s, "m %s %d %s %d\n", serve, m.Body.N, m.ID, m.Attempts)
		}
		fmt.Fprintf(&s, "e %s %d %d\n", serve, start.UnixNano(), time.Now().UnixNano())
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(os.Getenv("CLUSTER_APP_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(s.String())
		return err
	}})
}
