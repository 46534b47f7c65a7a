//go:build js && wasm

package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall/js"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// global is the name of the object, on the Worker's globalThis, through which the entry and the
// program meet: the entry sets its config and jsonText before it starts the program, and
// Serve adds the queue and fetch handlers before the program's main blocks.
const global = "__duilie"

// Serve runs p as the Worker's handlers, and never returns: the entry's queue and fetch
// handlers call p.Queue and p.Fetch, one event per call, on the host's event model. It must be
// called from main of a program started by the entry duilie worker build writes; app.Main
// calls it when the program is built for js/wasm.
func Serve(p duilie.Program) {
	g := js.Global().Get(global)
	if g.Type() != js.TypeObject {
		fmt.Fprintln(os.Stderr, "duilie: this program runs as a Cloudflare Worker, started by the entry that duilie worker build writes")
		os.Exit(70)
	}
	w := &worker{prog: p, jsonText: g.Get("jsonText"), log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	w.cfg, w.cfgErr = config(g.Get("config"))
	w.byQueue = map[string][]string{}
	for b, q := range w.cfg.Bindings {
		w.byQueue[q] = append(w.byQueue[q], b)
	}
	g.Set("queue", js.FuncOf(w.queue))
	g.Set("fetch", js.FuncOf(w.fetch))
	select {} // the handlers run on the goroutines of JavaScript's calls
}

// config reads the entry's configuration.
func config(v js.Value) (Config, error) {
	var c Config
	if v.Type() != js.TypeObject {
		return c, errors.New("duilie: the Worker's entry has no configuration: rebuild it with duilie worker build")
	}
	if err := json.Unmarshal([]byte(js.Global().Get("JSON").Call("stringify", v).String()), &c); err != nil {
		return c, fmt.Errorf("duilie: the Worker's configuration: %w", err)
	}
	return c, nil // host.New checks the settings
}

// worker is the program's side of the Worker.
type worker struct {
	prog     duilie.Program
	cfg      Config
	cfgErr   error
	byQueue  map[string][]string // queue → its bindings
	jsonText js.Value            // the entry's jsonText(message)
	log      *slog.Logger
}

// host makes the host of one event, on the Worker's env.
func (w *worker) host(env js.Value) (*host.Host, error) {
	if w.cfgErr != nil {
		return nil, w.cfgErr
	}
	return host.New(host.Config{
		Platform:    &envPlatform{env: env, byQueue: w.byQueue},
		Permissions: w.cfg.Permissions,
		Bindings:    w.cfg.Bindings,
		TimeLimit:   time.Duration(w.cfg.TimeLimitMS) * time.Millisecond,
		Observer:    host.LogObserver(w.log),
		Logger:      w.log,
	})
}

// queue is the Worker's queue(batch, env, ctx) handler: one queue event. The promise it returns
// rejects when the event failed, so Cloudflare retries the messages the program did not ack or
// retry.
func (w *worker) queue(_ js.Value, args []js.Value) any {
	batch, env := arg(args, 0), arg(args, 1)
	return promise(func() (js.Value, error) {
		if w.prog.Queue == nil {
			return js.Undefined(), errors.New("duilie: this program has no queue handler (Program.Queue)")
		}
		h, err := w.host(env)
		if err != nil {
			return js.Undefined(), err
		}
		ds := w.deliveries(batch)
		cc := host.ConsumerConfig{Queue: batch.Get("queue").String()}
		return js.Undefined(), h.Deliver(context.Background(), cc, batchConsumer{}, ds, w.prog.Queue)
	})
}

// deliveries are the messages of a MessageBatch, each with its body as JSON text when it is a
// JSON value.
func (w *worker) deliveries(batch js.Value) []platform.Delivery {
	msgs := batch.Get("messages")
	ds := make([]platform.Delivery, msgs.Length())
	for i := range ds {
		m := msgs.Index(i)
		d := platform.Delivery{Token: m, Message: platform.Message{
			ID:        m.Get("id").String(),
			Attempts:  m.Get("attempts").Int(),
			Timestamp: int64(m.Get("timestamp").Call("getTime").Float()),
		}}
		if text := w.jsonText.Invoke(m); text.Type() == js.TypeString {
			d.Body, d.ContentType = []byte(text.String()), platform.JSON
		} else {
			d.ContentType = platform.V8 // not a JSON value: ReadBatch says so
		}
		ds[i] = d
	}
	return ds
}

// batchConsumer settles a MessageBatch: the host's resolution becomes the messages' own calls.
type batchConsumer struct{}

func (batchConsumer) Receive(context.Context, int) ([]platform.Delivery, error) {
	return nil, platform.Permanent(errors.New("a Worker's batches come to its queue handler"))
}

func (batchConsumer) InProgress(context.Context, []platform.Delivery) error { return nil }

// Settle calls ack() on acked messages and retry() on retried ones. Messages without a call
// are left to Cloudflare: a normal end acks them once the handler returns, and a failed event's
// handler throws, which retries them.
func (batchConsumer) Settle(_ context.Context, s platform.Settlement) (err error) {
	defer recoverJS(&err)
	for _, r := range s.Messages {
		m := r.Token.(js.Value)
		switch r.Call.Kind {
		case platform.AckCall:
			m.Call("ack")
		case platform.RetryCall:
			if d := r.Call.DelaySeconds; d > 0 {
				m.Call("retry", map[string]any{"delaySeconds": d})
			} else {
				m.Call("retry")
			}
		}
	}
	return nil
}

func (batchConsumer) Close() error { return nil }

// envPlatform is the Worker's env as a platform: its Queue bindings are the producers. Cloudflare
// counts deliveries and dead-letters itself.
type envPlatform struct {
	env     js.Value
	byQueue map[string][]string
}

func (p *envPlatform) Queue(_ context.Context, name string) (platform.Queue, error) {
	bindings := p.byQueue[name]
	for _, b := range bindings {
		if v := p.env.Get(b); v.Type() == js.TypeObject && v.Get("send").Type() == js.TypeFunction {
			return envQueue{v}, nil
		}
	}
	return nil, fmt.Errorf("the Worker has no Queue binding %v for queue %s (declare it in wrangler.jsonc's queues.producers)", bindings, name)
}

func (p *envPlatform) Consume(context.Context, string, platform.ConsumerOptions) (platform.Consumer, error) {
	return nil, errors.New("a Worker's queues are consumed by its queue handler")
}

func (p *envPlatform) Close() error { return nil }

// Capabilities: Cloudflare applies max_retries and the dead-letter queue.
func (p *envPlatform) Capabilities() platform.Capabilities {
	return platform.Capabilities{Retries: true}
}

// envQueue is one Queue binding.
type envQueue struct{ binding js.Value }

// Send calls send(value, options), both parsed from the texts the platform contract defines.
func (q envQueue) Send(ctx context.Context, body []byte, opts platform.SendOptions) error {
	return call(ctx, q.binding, "send", parseJSON(body), parseJSON(opts.AppendJSON(nil)))
}

// SendBatch calls sendBatch([{body, contentType, delaySeconds?}, …]).
func (q envQueue) SendBatch(ctx context.Context, items []platform.BatchItem) error {
	return call(ctx, q.binding, "sendBatch", parseJSON(platform.AppendItemsJSON(nil, items)))
}

func parseJSON(text []byte) js.Value {
	return js.Global().Get("JSON").Call("parse", string(text))
}

// call calls a method that returns a promise and waits for it, or for ctx to end.
func call(ctx context.Context, v js.Value, method string, args ...any) (err error) {
	defer recoverJS(&err)
	_, err = await(ctx, v.Call(method, args...))
	return err
}

// await waits for promise p to settle, or for ctx to end.
func await(ctx context.Context, p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	done := make(chan result, 1)
	resolved := js.FuncOf(func(_ js.Value, args []js.Value) any {
		done <- result{v: arg(args, 0)}
		return nil
	})
	rejected := js.FuncOf(func(_ js.Value, args []js.Value) any {
		done <- result{err: jsError(arg(args, 0))}
		return nil
	})
	release := func() { resolved.Release(); rejected.Release() }
	js.Global().Get("Promise").Call("resolve", p).Call("then", resolved, rejected)
	select {
	case r := <-done:
		release()
		return r.v, r.err
	case <-ctx.Done():
		go func() { <-done; release() }() // the callbacks live until the promise settles
		return js.Undefined(), ctx.Err()
	}
}

// promise runs fn on its own goroutine, so it may wait for other promises, and returns a
// promise of its result.
func promise(fn func() (js.Value, error)) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer executor.Release()
			v, err := func() (v js.Value, err error) {
				defer recoverJS(&err)
				return fn()
			}()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}

// platformError is a JavaScript exception or rejection. Its Error is the thrown Error's message
// or, for anything else thrown, its String().
type platformError struct{ msg string }

func (e *platformError) Error() string { return e.msg }

func jsError(v js.Value) error {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			return &platformError{m.String()}
		}
	}
	return &platformError{js.Global().Call("String", v).String()}
}

// recoverJS turns a JavaScript exception thrown into Go (syscall/js panics with a js.Error)
// into *err; other panics go on.
func recoverJS(err *error) {
	if p := recover(); p != nil {
		je, ok := p.(js.Error)
		if !ok {
			panic(p)
		}
		*err = jsError(je.Value)
	}
}

func arg(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}
