//go:build js && wasm

package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
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
	w := &worker{prog: p, jsonText: g.Get("jsonText"), log: slog.New(slog.DiscardHandler)}
	w.cfg, w.cfgErr = config(g.Get("config"))
	if w.cfg.LogEvents {
		// Every level of the host's lines goes to console.debug: they describe the invocation,
		// which Cloudflare records at its own level, with the handler's exception when it
		// failed. Without them the host writes nothing: a failure it would log (messages it
		// could not settle) rejects the handler with its message.
		w.log = slog.New(newConsoleHandler(nil, func(_ slog.Level, line string) {
			console("debug", line)
		}))
		w.eventLog = host.LogObserver(w.log)
	}
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
	log      *slog.Logger        // the host's lines: console.debug with [worker] log_events, else none
	eventLog host.Observer       // the host's line per event, with [worker] log_events
}

// host makes the host of one event, on the Worker's env. When failure is not nil, the event's
// failure lands in it as the host reports the event (nil for a normal end).
func (w *worker) host(env js.Value, failure *error) (*host.Host, error) {
	if w.cfgErr != nil {
		return nil, w.cfgErr
	}
	return host.New(host.Config{
		Platform:    &envPlatform{env: env, byQueue: w.byQueue},
		Permissions: w.cfg.Permissions,
		Bindings:    w.deployed(env),
		TimeLimit:   time.Duration(w.cfg.TimeLimitMS) * time.Millisecond,
		Observer: func(r host.Report) {
			if er, ok := r.(*host.EventReport); ok && failure != nil {
				*failure = er.Err
			}
			if w.eventLog != nil {
				w.eventLog(r)
			}
		},
		Logger: w.log,
	})
}

// deployed is the bindings of duilie.toml that the Worker's env has as Queue bindings. The env
// is the deployment: a binding it lacks is not configured, and using it aborts with
// 绑定不存在：B, as on duilie serve (SPEC §8.2).
func (w *worker) deployed(env js.Value) map[string]string {
	out := make(map[string]string, len(w.cfg.Bindings))
	for b, q := range w.cfg.Bindings {
		if isQueueBinding(get(env, b)) {
			out[b] = q
		}
	}
	return out
}

// isQueueBinding reports whether v looks like a Queue binding: an object with a send method.
func isQueueBinding(v js.Value) bool {
	return isObject(v) && typeOf(get(v, "send")) == js.TypeFunction
}

// queue is the Worker's queue(batch, env, ctx) handler: one queue event. The promise it returns
// rejects when the event failed, with the failure's message (an abort's own text), so that
// Cloudflare records it and retries the messages the program did not ack or retry.
func (w *worker) queue(_ js.Value, args []js.Value) any {
	batch, env := arg(args, 0), arg(args, 1)
	return promise(func() (js.Value, error) {
		if w.prog.Queue == nil {
			return js.Undefined(), errors.New("duilie: this program has no queue handler (Program.Queue)")
		}
		queue, ds, err := w.readBatch(batch)
		if err != nil {
			return js.Undefined(), err
		}
		h, err := w.host(env, nil) // Deliver returns the failure
		if err != nil {
			return js.Undefined(), err
		}
		cc := host.ConsumerConfig{Queue: queue}
		return js.Undefined(), h.Deliver(context.Background(), cc, batchConsumer{}, ds, w.prog.Queue)
	})
}

// batchConsumer settles a MessageBatch: the host's resolution becomes the messages' own calls.
type batchConsumer struct{}

func (batchConsumer) Receive(context.Context, int) ([]platform.Delivery, error) {
	return nil, platform.Permanent(errors.New("a Worker's batches come to its queue handler"))
}

func (batchConsumer) InProgress(context.Context, []platform.Delivery) error { return nil }

// Settle calls ack() on acked messages and retry() on retried ones. Messages without a call
// are left to Cloudflare: a normal end acks them once the handler returns, and a failed event's
// handler throws, which retries them. A call that fails does not keep the others from being
// made; the error names every one that failed.
func (batchConsumer) Settle(_ context.Context, s platform.Settlement) error {
	var errs []error
	for i, r := range s.Messages {
		var err error
		switch r.Call.Kind {
		case platform.AckCall:
			err = invoke(r.Token.(js.Value), "ack")
		case platform.RetryCall:
			if d := r.Call.DelaySeconds; d > 0 {
				err = invoke(r.Token.(js.Value), "retry", map[string]any{"delaySeconds": d})
			} else {
				err = invoke(r.Token.(js.Value), "retry")
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("duilie: messages[%d] (id %q): %w", i, r.ID, err))
		}
	}
	return errors.Join(errs...)
}

// invoke calls v.method(args…), a method that returns nothing the host waits for.
func invoke(v js.Value, method string, args ...any) (err error) {
	defer recoverJS(&err)
	if typeOf(get(v, method)) != js.TypeFunction {
		return fmt.Errorf("%s() is not a function of the message", method)
	}
	v.Call(method, args...)
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
		if v := get(p.env, b); isQueueBinding(v) {
			return envQueue{v}, nil
		}
	}
	// The host resolves only the bindings the env has (worker.deployed): the env changed.
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
// promise of its result. A failure rejects it with an Error of the failure's message. A panic
// in fn (the adapter's own code meeting a value it did not expect) fails only this call: the
// promise rejects with what the panic said, and the program goes on to its next event.
func promise(fn func() (js.Value, error)) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer executor.Release()
			v, err := func() (v js.Value, err error) {
				defer func() {
					if p := recover(); p != nil {
						err = &boundaryPanic{value: p, stack: debug.Stack()}
					}
				}()
				return fn()
			}()
			if err != nil {
				reject.Invoke(errorValue(err))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}

// errorValue is a JavaScript Error of err's message; for a panic, its stack is the Go stack.
func errorValue(err error) js.Value {
	e := js.Global().Get("Error").New(err.Error())
	var pe *host.PanicError
	var bp *boundaryPanic
	switch {
	case errors.As(err, &pe):
		e.Set("stack", "Error: "+err.Error()+"\n"+string(pe.Stack))
	case errors.As(err, &bp):
		e.Set("stack", "Error: "+err.Error()+"\n"+string(bp.stack))
	}
	return e
}

// boundaryPanic is a panic in the adapter's code, where Go meets JavaScript.
type boundaryPanic struct {
	value any
	stack []byte
}

func (p *boundaryPanic) Error() string {
	if je, ok := p.value.(js.Error); ok {
		return "duilie: a JavaScript exception in the Worker's adapter: " + jsError(je.Value).Error()
	}
	return fmt.Sprintf("duilie: a panic in the Worker's adapter: %v", p.value)
}

// platformError is a JavaScript exception or rejection. Its Error is the thrown Error's message
// or, for anything else thrown, its String().
type platformError struct{ msg string }

func (e *platformError) Error() string { return e.msg }

// jsError is the error of a thrown value v. It never panics: it runs in recovery and in
// JavaScript's callbacks, where a panic would end the program.
func jsError(v js.Value) (err error) {
	defer func() {
		if recover() != nil {
			err = &platformError{"a JavaScript exception that cannot be read"}
		}
	}()
	if isObject(v) {
		if m := get(v, "message"); typeOf(m) == js.TypeString {
			return &platformError{m.String()}
		}
	}
	return &platformError{js.Global().Call("String", v).String()}
}

// recoverJS turns a panic at a call into JavaScript into *err: a JavaScript exception thrown
// into Go (syscall/js panics with a js.Error) is its message; anything else (a value of the
// wrong type) is what the panic said.
func recoverJS(err *error) {
	if p := recover(); p != nil {
		if je, ok := p.(js.Error); ok {
			*err = jsError(je.Value)
			return
		}
		*err = fmt.Errorf("%v", p)
	}
}

func arg(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}
