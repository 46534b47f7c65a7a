package duilie

import "net/http"

// Handler is a program's queue handler: the host calls it once per event. Returning an error or
// panicking fails the event (a queue event's messages are then delivered again); so does an
// abort, whatever the handler returns.
type Handler func(ev *Event) error

// FetchHandler is a program's fetch handler: it handles one fetch event, an HTTP request, with
// the event for the interface's functions. The request's context is the event's. Returning an
// error or panicking fails the event, which answers 500 unless the handler has begun its
// response.
type FetchHandler func(ev *Event, w http.ResponseWriter, r *http.Request) error

// Program is a Go program's handlers, run once per event: Queue handles queue events, one call
// per batch; Fetch handles fetch events, one call per HTTP request. duilie serve runs them
// in-process (package server, package app), and so does a Worker built by duilie worker build
// (package workers).
type Program struct {
	// Queue handles queue events: one call per batch. Required when there are consumers.
	Queue Handler
	// Fetch handles fetch events: one call per HTTP request. Required when there is a fetch
	// listener.
	Fetch FetchHandler
}
