//go:build js && wasm

package workers

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"syscall/js"
)

// fetch is the Worker's fetch(request, env, ctx) handler: one fetch event, run by the host as
// duilie serve runs a request to [app] listen. The request body and the response are buffered.
// An event that fails (an abort, the time limit, an error or a panic) rejects the promise with
// the failure's message, as a JavaScript fetch handler that throws: Cloudflare records the
// exception with it and answers the client 500. Since nothing reached the client yet, this
// holds even when the handler had written a response, which duilie serve would have begun to
// send.
func (w *worker) fetch(_ js.Value, args []js.Value) any {
	req, env := arg(args, 0), arg(args, 1)
	return promise(func() (js.Value, error) {
		if w.prog.Fetch == nil {
			return response(http.StatusNotFound, http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
				[]byte("this program has no fetch handler (Program.Fetch)\n")), nil
		}
		var failure error
		h, err := w.host(env, &failure)
		if err != nil {
			return js.Undefined(), err
		}
		r, err := request(req)
		if err != nil {
			return js.Undefined(), err
		}
		rec := &recorder{header: http.Header{}}
		h.Fetch(w.prog.Fetch).ServeHTTP(rec, r)
		if failure != nil {
			return js.Undefined(), failure
		}
		return response(rec.status, rec.header, rec.body.Bytes()), nil
	})
}

// request turns a JavaScript Request into an *http.Request.
func request(req js.Value) (*http.Request, error) {
	method, url := get(req, "method"), get(req, "url")
	if typeOf(method) != js.TypeString || typeOf(url) != js.TypeString {
		return nil, fmt.Errorf("duilie: the fetch handler's first argument is %s, not a Request", describe(req))
	}
	var body []byte
	if b := get(req, "body"); !b.IsNull() && !b.IsUndefined() {
		buf, err := await(context.Background(), req.Call("arrayBuffer"))
		if err != nil {
			return nil, err
		}
		u8 := js.Global().Get("Uint8Array").New(buf)
		body = make([]byte, u8.Length())
		js.CopyBytesToGo(body, u8)
	}
	r, err := http.NewRequest(method.String(), url.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	entries := js.Global().Get("Array").Call("from", get(req, "headers"))
	for i := range entries.Length() {
		kv := entries.Index(i)
		r.Header.Add(kv.Index(0).String(), kv.Index(1).String())
	}
	r.RequestURI = r.URL.RequestURI()
	if ip := r.Header.Get("CF-Connecting-IP"); ip != "" {
		r.RemoteAddr = ip
	}
	return r, nil
}

// response makes a JavaScript Response.
func response(status int, header http.Header, body []byte) js.Value {
	headers := js.Global().Get("Headers").New()
	for k, vs := range header {
		for _, v := range vs {
			headers.Call("append", k, v)
		}
	}
	var b any // null: statuses such as 204 and 304 must have no body
	if len(body) > 0 {
		u8 := js.Global().Get("Uint8Array").New(len(body))
		js.CopyBytesToJS(u8, body)
		b = u8
	}
	return js.Global().Get("Response").New(b, map[string]any{"status": status, "headers": headers})
}

// recorder is the http.ResponseWriter of one fetch event, kept until the event has ended.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
