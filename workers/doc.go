// Package workers runs a duilie program as a Cloudflare Worker: the program's Go code, compiled
// to WebAssembly (GOOS=js GOARCH=wasm), gets its events from the Worker's handlers, and the
// interface's functions act on the Worker's Queue bindings and MessageBatch (SPEC §10).
//
// A program does not call this package itself: app.Main does, when the program is built for
// js/wasm, so the same main runs under duilie serve and as a Worker. duilie worker build makes
// the Worker (the Wasm module, a small JavaScript entry, the Go distribution's wasm_exec.js and
// a wrangler.jsonc from the program's duilie.toml); docs/workers.md tells how to run it in
// Miniflare and deploy it with wrangler.
//
// # What maps to what
//
//   - Send is env.<BINDING>.send(value, {contentType: "json"}) with "delaySeconds" added when the
//     delay is not 0, value being JSON.parse of the normalized body; SendBatch is
//     sendBatch([{body, contentType: "json", delaySeconds?}, …]). A rejected call is
//     队列发送失败： (队列批量发送失败：) followed by the platform's message.
//   - The queue(batch, env, ctx) handler is one queue event. ReadBatch builds its JSON text from
//     the MessageBatch (queue, and each message's id, attempts, timestamp in ms and body); a
//     body that is not a JSON value (a foreign producer's bytes, or a structured clone holding a
//     Date, a Map, undefined, NaN…) is 队列消息正文不是 JSON 值：序号 i. When the event ends, an
//     Ack becomes the message's ack(), a Retry its retry({delaySeconds}) (retry() for 0).
//     The batch is read defensively, as a mock's or another host's may differ from Cloudflare's:
//     a timestamp is a Date or a number of ms (else 0); an id that is a number or a boolean is
//     its String() (another non-string is ""); attempts that are no number are 1; a property
//     that throws is missing; a batch that is not one (no array of at most 100 messages) fails
//     its event saying why.
//   - The fetch(request, env, ctx) handler is one fetch event: the program's fetch handler gets
//     the request as an *http.Request and its response becomes the Worker's Response.
//   - A failed event (an abort, the time limit, an error, a panic) makes the handler reject
//     with an Error of its failure's message, an abort's own text (未授权的QUEUE绑定：B…), as a
//     JavaScript handler that throws: Cloudflare records the exception, answers a fetch 500,
//     and retries a batch's messages without a call, with the consumer's max_retries and
//     dead-letter queue. A panic in the adapter itself fails only its event.
//   - Permissions ({"QUEUE":[…]}) and the bindings' queues come from duilie.toml, and the checks,
//     messages and aborts are the host's own, as under duilie serve: a binding not permitted
//     aborts with 未授权的QUEUE绑定：B, one not configured with 绑定不存在：B. The Worker's env is
//     the deployment: a binding that duilie.toml configures but the env lacks is not
//     configured either, 绑定不存在：B.
//   - The program's stdout is console.log and its stderr console.error, a call per line. The
//     log/slog default logger writes console.debug, info, warn or error by level, the message
//     and its attributes without a time or a level (NewConsoleHandler, for a logger of one's
//     own). The host writes nothing of its own unless duilie.toml's [worker] log_events is
//     true: then its line per event goes to console.debug.
//
// # What a program may not do in a Worker
//
// A Worker runs only while it handles an event, in one thread, without a file system or
// processes: no goroutine may outlive its event (it may never run again), files and
// os/exec fail, and http.Client goes through the Worker's fetch. Environment variables are the
// Worker's string bindings ([vars] in wrangler), read once when the first event starts the
// program. State kept in memory may survive between events of one isolate, or not: the
// interface assumes a fresh program per event.
package workers

import "github.com/duilie/duilie/internal/host"

// Config is what a Worker's entry hands the program: the host's settings from duilie.toml.
// duilie worker build writes it into the entry as JSON.
type Config struct {
	// Permissions lists the bindings the program may use ([permissions] QUEUE).
	Permissions host.Permissions `json:"permissions"`
	// Bindings maps each binding to its queue ([[queues.producers]]); the Worker's env has a
	// Queue binding of the same name.
	Bindings map[string]string `json:"bindings"`
	// TimeLimitMS is every event's wall-clock limit in milliseconds ([app] time_limit_ms);
	// 0 means 30000.
	TimeLimitMS int64 `json:"time_limit_ms"`
	// Settings are duilie.toml's [worker] table.
	Settings
}

// Settings are the [worker] table of duilie.toml: what only a Worker reads (duilie serve has
// its own log lines, and ignores the table).
type Settings struct {
	// LogEvents writes the host's line for each event (the line duilie serve logs: its kind,
	// outcome, duration and messages) to console.debug. Off by default, since Cloudflare
	// records each invocation itself.
	LogEvents bool `toml:"log_events" json:"log_events" rule:"must be true or false"`
}
