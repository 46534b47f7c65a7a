// Package dashboard is duilie serve's web dashboard and its Prometheus metrics: every queue's
// counts and rates, one queue's live charts, a message browser with the operator's actions
// (replay a dead-letter queue, delete, purge, pause, resume, send a test message through the
// interface's checks), recent events, and GET /metrics.
//
// What it counts comes from the server's reports alone (Observe), and what it reads and
// changes goes through the server's Client: its operator operations and the interface's own
// send. No rule of the interface or of the operations lives here.
//
// # Security
//
// A dashboard with a Token needs it on every request: an Authorization: Bearer header (for
// Prometheus and scripts), or the cookie that opening /?token=… sets. The dashboard duilie serve
// attaches always has one, on loopback too, since any account on the machine can reach a
// loopback port: dashboard.token_env's, or else the token only the serve's user can read, in
// the data directory (server.SurfaceToken). A Dashboard made with New without a Token serves
// only requests whose Host is a loopback name, so another site cannot reach it through DNS
// rebinding. Every action is a POST with a JSON body; a POST from another origin (its Origin or
// Sec-Fetch-Site says so) is refused, so no page elsewhere can act on the operator's behalf.
package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duilie/duilie/server"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/duilie/duilie"
)

//go:embed static
var static embed.FS

// Options configure a Dashboard.
type Options struct {
	// Token, when not "", is required on every request.
	Token string
	// Logger receives the dashboard's own failures; nil means slog.Default().
	Logger *slog.Logger
}

// Dashboard serves the dashboard and /metrics. Observe must receive the server's every report.
type Dashboard struct {
	o       Options
	c       *server.Client
	metrics *metrics
	history *history
	mux     *http.ServeMux
}

// Attach adds the dashboard of srv's configuration ([dashboard]) to srv, unless it has none:
// from now on it observes every report, and it is served from Start until Shutdown. It returns
// the attached surface (nil for none), whose Addr says where it listens once started.
func Attach(srv *server.Server) (*server.Attached, error) {
	c := srv.Client()
	cfg := c.Config()
	if cfg.Dashboard.Listen == "" {
		return nil, nil
	}
	token, err := cfg.Dashboard.ResolveToken()
	if err != nil {
		return nil, err
	}
	ownToken := token == ""
	if ownToken {
		// None configured: the token only this user can read, in the data directory.
		if token, err = cfg.SurfaceToken(); err != nil {
			return nil, err
		}
	}
	d := New(c, Options{Token: token, Logger: cfg.Logger})
	if err := srv.Subscribe(d.Observe); err != nil {
		return nil, err
	}
	log := cfg.Logger
	var recorded string // the URL recorded for duilie dashboard
	return srv.Attach(server.Surface{Name: "the dashboard", Addr: cfg.Dashboard.Listen, Handler: d,
		Fallback: cfg.Dashboard.Listen == server.DefaultDashboardListen,
		Started: func(addr string) {
			url := "http://" + addr + "/"
			if ownToken {
				// The URL that opens it, for duilie dashboard and the log: only the token
				// file's own user reads the one, and runs the serve that writes the other.
				url += "?token=" + token
				if err := server.RecordDashboardURL(cfg.TokenDir(), url); err != nil {
					log.Warn("recording the dashboard's URL for duilie dashboard", "err", err)
				} else {
					recorded = url
				}
			}
			log.Info("dashboard", "url", url, "metrics", "http://"+addr+"/metrics")
		},
		Stop: func(context.Context) {
			if recorded != "" {
				server.ForgetDashboardURL(cfg.TokenDir(), recorded)
			}
		}})
}

// New makes the dashboard of c's queues.
func New(c *server.Client, o Options) *Dashboard {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var consumed []string
	for _, cc := range c.Config().Consumers {
		consumed = append(consumed, cc.Queue)
	}
	d := &Dashboard{o: o, c: c, metrics: newMetrics(c, consumed), history: newHistory(), mux: http.NewServeMux()}
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	d.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	d.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); t != "" && d.o.Token != "" {
			if !d.tokenOK(t) {
				forbidden(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		http.ServeFileFS(w, r, sub, "index.html")
	})
	d.mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{Registry: d.metrics.reg}))
	d.mux.HandleFunc("GET /api/queues", d.queues)
	d.mux.HandleFunc("GET /api/events", d.events)
	d.mux.HandleFunc("GET /api/queues/{queue}/messages", d.messages)
	d.mux.HandleFunc("GET /api/queues/{queue}/series", d.series)
	d.mux.HandleFunc("POST /api/queues/{queue}/pause", d.action(func(ctx context.Context, q string, _ []byte) (any, error) {
		return nil, d.c.Pause(ctx, q)
	}))
	d.mux.HandleFunc("POST /api/queues/{queue}/resume", d.action(func(ctx context.Context, q string, _ []byte) (any, error) {
		return nil, d.c.Resume(ctx, q)
	}))
	d.mux.HandleFunc("POST /api/queues/{queue}/purge", d.action(func(ctx context.Context, q string, _ []byte) (any, error) {
		n, err := d.c.Purge(ctx, q)
		return map[string]int64{"purged": n}, err
	}))
	d.mux.HandleFunc("POST /api/queues/{queue}/replay", d.action(d.replay))
	d.mux.HandleFunc("POST /api/queues/{queue}/delete", d.action(func(ctx context.Context, q string, body []byte) (any, error) {
		var req struct {
			IDs []string `json:"ids"`
		}
		if err := decode(body, &req); err != nil || len(req.IDs) == 0 {
			return nil, badRequest(`the body must be {"ids":["<message id>",…]}`)
		}
		n, err := d.c.Delete(ctx, q, req.IDs...)
		return map[string]int{"deleted": n}, err
	}))
	d.mux.HandleFunc("POST /api/queues/{queue}/send", d.action(d.send))
	return d
}

// Observe takes one of the server's reports.
func (d *Dashboard) Observe(r server.Report) {
	d.metrics.observe(r)
	d.history.observe(r)
}

const cookieName = "duilie_dashboard"

// ServeHTTP serves the dashboard, after the checks of the package documentation.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	switch {
	case d.o.Token == "" && !server.Loopback(r.Host):
		http.Error(w, "this dashboard answers only on a loopback address (it has no token)", http.StatusForbidden)
		return
	case d.o.Token != "" && !d.authorized(r):
		forbidden(w)
		return
	case r.Method == http.MethodPost && !sameOrigin(r):
		http.Error(w, "a dashboard action must come from the dashboard's own page", http.StatusForbidden)
		return
	}
	d.mux.ServeHTTP(w, r)
}

func forbidden(w http.ResponseWriter) {
	http.Error(w, "this dashboard needs its token: open /?token=<token>, or send Authorization: Bearer <token>", http.StatusForbidden)
}

func (d *Dashboard) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(d.o.Token)) == 1
}

// authorized reports whether r carries the token, as a bearer token or the cookie, or is the
// page's own GET /?token=… (checked there).
func (d *Dashboard) authorized(r *http.Request) bool {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && d.tokenOK(t) {
		return true
	}
	if c, err := r.Cookie(cookieName); err == nil && d.tokenOK(c.Value) {
		return true
	}
	return r.Method == http.MethodGet && r.URL.Path == "/" && r.URL.Query().Has("token")
}

// sameOrigin reports whether a POST comes from the dashboard's own page: its Origin, when the
// browser sent one, is this host, and Sec-Fetch-Site, when sent, says same-origin.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// httpError is an error with its status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(msg string) error { return &httpError{http.StatusBadRequest, msg} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers an error: its own status, 400 for an argument out of range, 404 for a queue or
// message that is not there, 501 for a platform without the operation, 503 for a server that
// is not running, else 502 (the platform failed).
func (d *Dashboard) fail(w http.ResponseWriter, err error) {
	var he *httpError
	status := http.StatusBadGateway
	switch {
	case errors.As(err, &he):
		status = he.status
	case errors.Is(err, server.ErrNoQueue), errors.Is(err, server.ErrNoMessage):
		status = http.StatusNotFound
	case errors.Is(err, server.ErrCursor), errors.Is(err, server.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, errors.ErrUnsupported):
		status = http.StatusNotImplemented
	case errors.Is(err, server.ErrNotStarted), errors.Is(err, server.ErrClosed):
		status = http.StatusServiceUnavailable
	default:
		d.o.Logger.Warn("dashboard", "err", err)
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func decode(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// maxActionBytes bounds an action's body: a test message of 128000 bytes, JSON-escaped.
const maxActionBytes = 1 << 20

// action serves a POST that changes something: a JSON body (or none), then fn.
func (d *Dashboard) action(fn func(ctx context.Context, queue string, body []byte) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength != 0 && mt != "application/json" {
			d.fail(w, &httpError{http.StatusUnsupportedMediaType, "an action's body must be application/json"})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBytes))
		if err != nil {
			d.fail(w, &httpError{http.StatusRequestEntityTooLarge, "an action's body must be at most 1 MiB"})
			return
		}
		q := r.PathValue("queue")
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		out, err := fn(ctx, q, body)
		if err != nil {
			d.fail(w, err)
			return
		}
		if out == nil {
			out = struct{}{}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// queueRow is one queue of GET /api/queues.
type queueRow struct {
	server.QueueInfo
	DeadLetterQueue string   `json:"dead_letter_queue,omitempty"` // its consumer's
	DeadLetters     *int64   `json:"dead_letters,omitempty"`      // ready and delayed in that queue
	Sources         []string `json:"sources,omitempty"`           // queues whose consumers dead-letter here
	Bindings        []string `json:"bindings,omitempty"`          // bindings that send here
	SendRate        float64  `json:"send_rate"`                   // messages/s over the last 10 s
	SettleRate      float64  `json:"settle_rate"`
	Operable        bool     `json:"operable"` // the platform has operator operations
}

func (d *Dashboard) queueRows(ctx context.Context) ([]queueRow, error) {
	qs, err := d.c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]server.QueueInfo{}
	for _, q := range qs {
		byName[q.Queue] = q
	}
	operable := d.c.Operable(ctx)
	rows := make([]queueRow, len(qs))
	for i, q := range qs {
		row := queueRow{QueueInfo: q, DeadLetterQueue: q.DeadLetterQueue, Sources: q.Sources, Bindings: q.Bindings, Operable: operable}
		if q.DeadLetterQueue != "" {
			n := byName[q.DeadLetterQueue].Ready + byName[q.DeadLetterQueue].Delayed
			row.DeadLetters = &n
		}
		row.SendRate, row.SettleRate = d.history.rates(q.Queue)
		rows[i] = row
	}
	return rows, nil
}

func (d *Dashboard) queues(w http.ResponseWriter, r *http.Request) {
	rows, err := d.queueRows(r.Context())
	if err != nil {
		d.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// messages answers a page of a queue's messages, each as the server renders a stored message.
// With match, only those whose id or body text holds it (see matches): the pages are read
// from the cursor on until limit messages matched, the queue ended, or maxMatchScan messages
// (maxMatchBytes of bodies) were read; the answer holds every match of the pages read, says how
// many messages it read, and its next continues the scan.
func (d *Dashboard) messages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := server.PeekOptions{Cursor: q.Get("cursor"), State: q.Get("state")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > server.MaxPeekLimit {
			d.fail(w, badRequest("limit must be 1–1000"))
			return
		}
		o.Limit = n
	}
	out := struct {
		Messages []server.Message `json:"messages"`
		Next     string           `json:"next,omitempty"`
		Scanned  int              `json:"scanned,omitempty"` // with match: the messages read
	}{Messages: []server.Message{}}
	match := strings.ToLower(q.Get("match"))
	if match == "" {
		page, err := d.c.Peek(r.Context(), r.PathValue("queue"), o)
		if err != nil {
			d.fail(w, err)
			return
		}
		out.Messages, out.Next = append(out.Messages, page.Messages...), page.Next
		writeJSON(w, http.StatusOK, out)
		return
	}
	want := o.Limit
	if want == 0 {
		want = server.DefaultPeekLimit
	}
	o.Limit = server.MaxPeekLimit
	bytes := 0
	for {
		page, err := d.c.Peek(r.Context(), r.PathValue("queue"), o)
		if err != nil {
			d.fail(w, err)
			return
		}
		for _, m := range page.Messages {
			if matches(m, match) {
				out.Messages = append(out.Messages, m)
			}
			bytes += m.Size
		}
		out.Scanned += len(page.Messages)
		out.Next, o.Cursor = page.Next, page.Next
		if page.Next == "" || len(out.Messages) >= want || out.Scanned >= maxMatchScan || bytes >= maxMatchBytes {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// The most one filtered page reads: on the embedded engine about half a second's reading.
const (
	maxMatchScan  = 10000
	maxMatchBytes = 64 << 20
)

// matches reports whether m's id or its body's text holds lower (lower case), ignoring case:
// the body's text is the stored text of a JSON or text body (the JSON as the page shows it),
// and the base64 the page shows of any other.
func matches(m server.Message, lower string) bool {
	if strings.Contains(strings.ToLower(m.ID), lower) {
		return true
	}
	text := m.Body
	if m.Readable() {
		text = m.Raw
	}
	return strings.Contains(strings.ToLower(string(text)), lower)
}

func (d *Dashboard) series(w http.ResponseWriter, r *http.Request) {
	n := 120
	if s := r.URL.Query().Get("seconds"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > historySeconds {
			d.fail(w, badRequest("seconds must be 1–300"))
			return
		}
	}
	writeJSON(w, http.StatusOK, d.history.series(r.PathValue("queue"), n))
}

func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, d.history.recent(r.URL.Query().Get("queue"), 50))
}

// replay moves a dead-letter queue's messages (all, or the ids given) back to the queue whose
// consumer names it, or to "to".
func (d *Dashboard) replay(ctx context.Context, q string, body []byte) (any, error) {
	var req struct {
		IDs   []string `json:"ids"`
		Limit int      `json:"limit"`
		Delay int      `json:"delay"`
		To    string   `json:"to"`
	}
	if err := decode(body, &req); err != nil {
		return nil, badRequest(`the body must be {"ids"?:[…],"limit"?:n,"delay"?:seconds,"to"?:"queue"}: ` + err.Error())
	}
	r, err := d.c.Replay(ctx, q, server.ReplayOptions{To: req.To, IDs: req.IDs, Limit: req.Limit, Delay: time.Duration(req.Delay) * time.Second})
	return map[string]any{"replayed": r.Messages, "to": r.To}, err
}

// send sends a test message through the interface: 发送队列消息 with the queue's first binding,
// as a program would. The interface's exception or abort comes back verbatim, with status 200:
// the request did what it asked.
func (d *Dashboard) send(ctx context.Context, q string, body []byte) (any, error) {
	var req struct {
		Body  string `json:"body"`
		Delay int    `json:"delay"`
	}
	if err := decode(body, &req); err != nil {
		return nil, badRequest(`the body must be {"body":"<the message's JSON text>","delay"?:seconds}: ` + err.Error())
	}
	var bindings []string
	for b, name := range d.c.Config().Bindings {
		if name == q {
			bindings = append(bindings, b)
		}
	}
	if len(bindings) == 0 {
		return nil, &httpError{http.StatusConflict, "no binding sends to " + q + " ([[queues.producers]])"}
	}
	slices.Sort(bindings)
	type result struct {
		Sent      bool   `json:"sent"`
		Binding   string `json:"binding"`
		Exception string `json:"exception,omitempty"` // the interface's exception or abort, verbatim
		Code      string `json:"code,omitempty"`      // and for people: its code, gloss and detail
		Gloss     string `json:"gloss,omitempty"`
		Detail    string `json:"detail,omitempty"`
	}
	if err := d.c.Send(ctx, bindings[0], req.Body, req.Delay); err != nil {
		// The interface refusing a message is the answer to this request, not its failure.
		if code, gloss, detail, ok := duilie.Explain(err); ok {
			return result{Binding: bindings[0], Exception: err.Error(), Code: code, Gloss: gloss, Detail: detail}, nil
		}
		return nil, err
	}
	return result{Sent: true, Binding: bindings[0]}, nil
}
