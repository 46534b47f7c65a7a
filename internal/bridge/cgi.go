package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
)

// Limits of a fetch event.
const (
	// MaxRequestBytes is the largest request body a fetch event takes: 16 MiB. The body is read
	// whole before the program starts (so CONTENT_LENGTH is exact even for a chunked request);
	// a bigger one is answered 413 and starts no event.
	MaxRequestBytes = 16 << 20
	// MaxResponseBytes is the largest CGI response (headers and body) a program may write:
	// 64 MiB. The response is held until the program exits; past this size the program is
	// killed and the event fails.
	MaxResponseBytes = 64 << 20
	// MaxMetaVariable is the longest meta-variable (NAME=value) a request may make: Linux takes
	// no string over 128 KiB, its terminating NUL included, into a program's environment.
	MaxMetaVariable = 128<<10 - 1
	// MaxMetaBytes bounds a request's meta-variables together: 1 MiB, half the 2 MiB that
	// Linux usually allows a program's arguments and environment, leaving the rest to the
	// host's own environment. A request beyond either bound is answered 431 and runs no event.
	MaxMetaBytes = 1 << 20
)

// Fetch returns an http.Handler that serves each request as a fetch event of h (through h's
// fetch runtime, host.Host.Fetch): the command runs as a CGI/1.1 script (RFC 3875), with
// DUILIE_EVENT=fetch and DUILIE_BRIDGE added to the request's meta-variables, the request body
// on stdin and the response on stdout.
//
// The request body is read whole before the event starts (so CONTENT_LENGTH is exact even for
// a chunked request): a body over MaxRequestBytes is answered 413, headers the CGI environment
// cannot carry (MaxMetaVariable, MaxMetaBytes) 431, and a request holding a NUL byte 400,
// without an event. The whole response is held until the
// program exits. Exit status 0 with a well-formed CGI response sends that response; anything
// else fails the event and answers 500, whatever the program wrote: a non-zero exit, an abort
// (a bridge call, the time limit), a response without headers or with a malformed header line,
// a Status outside 200–599, no Content-Type, Location or Status, or a response over
// MaxResponseBytes. stderr is logged line by line with the event id. The event runs to its end
// or its time limit even if the client goes away, as a queue event would, so that the
// program's sends are never cut off halfway.
// readBody reads a request's body whole, up to MaxRequestBytes, into a buffer of its declared
// length, so that a full-size body takes its 16 MiB once rather than the 2–3 times that
// growing a buffer as it arrives leaves behind (max_fetch_concurrency of them at once).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	size := int64(bytes.MinRead)
	if r.ContentLength > 0 && r.ContentLength <= MaxRequestBytes {
		size += r.ContentLength // ReadFrom wants MinRead bytes free for every read, EOF's too
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	return buf.Bytes(), err
}

func (p *Runner) Fetch(h *host.Host) http.Handler {
	events := h.Fetch(p.fetch)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r)
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("request body over %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, "cannot read the request body", http.StatusBadRequest)
			return
		}
		meta, err := cgiMeta(r, len(body))
		switch {
		case errors.Is(err, errMetaTooBig):
			http.Error(w, err.Error(), http.StatusRequestHeaderFieldsTooLarge)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := context.WithValue(r.Context(), cgiRequestKey{}, &cgiRequest{meta: meta, body: body})
		events.ServeHTTP(w, r.WithContext(ctx))
	})
}

// cgiRequest is a request as Fetch read it, before its event started.
type cgiRequest struct {
	meta []string
	body []byte
}

type cgiRequestKey struct{}

// fetch is the fetch event of one request that Fetch read.
func (p *Runner) fetch(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
	req, _ := r.Context().Value(cgiRequestKey{}).(*cgiRequest)
	if req == nil {
		return errors.New("bridge: the request was not read by Runner.Fetch")
	}
	attrs := []any{"event", ev.ID(), "kind", string(ev.Kind()), "method", r.Method, "path", r.URL.Path}
	var out bytes.Buffer
	if err := p.run(ev, inherited(), req.meta, req.body, &out, attrs); err != nil {
		return err
	}
	res, err := parseCGI(out.Bytes())
	if err != nil {
		return err
	}
	res.write(w)
	return nil
}

// metaNames are the meta-variables of RFC 3875 §4.1 and the common extensions this package
// sets; none of them is inherited from the host's environment.
var metaNames = []string{
	"AUTH_TYPE", "CONTENT_LENGTH", "CONTENT_TYPE", "GATEWAY_INTERFACE", "PATH_INFO",
	"PATH_TRANSLATED", "QUERY_STRING", "REMOTE_ADDR", "REMOTE_HOST", "REMOTE_IDENT",
	"REMOTE_USER", "REQUEST_METHOD", "SCRIPT_NAME", "SERVER_NAME", "SERVER_PORT",
	"SERVER_PROTOCOL", "SERVER_SOFTWARE", "REQUEST_URI", "REMOTE_PORT", "HTTPS", "SCRIPT_FILENAME",
}

// inherited is the host's environment without anything a CGI script would take for a
// meta-variable: the names of RFC 3875 and every HTTP_* variable.
func inherited() []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return strings.HasPrefix(name, "HTTP_") || slices.Contains(metaNames, name)
	})
}

// errMetaTooBig is a request whose meta-variables a program's environment cannot hold.
var errMetaTooBig = errors.New("request headers too large for a CGI environment")

// cgiMeta returns the request's meta-variables (RFC 3875 §4.1), sorted by name for a stable
// environment. The script is mounted at the root: SCRIPT_NAME is empty and PATH_INFO is the
// whole decoded path. Every header becomes HTTP_<NAME> (Authorization included: the program is
// the application, not a third party) except Proxy (httpoxy), Content-Length and Content-Type,
// which are CONTENT_LENGTH and CONTENT_TYPE, and a header whose name holds anything but
// letters, digits and '-': X_Forwarded_For would map to the same HTTP_X_FORWARDED_FOR as
// X-Forwarded-For and could override what a proxy set, so it is dropped, as nginx and Apache
// drop it.
func cgiMeta(r *http.Request, bodyLen int) ([]string, error) {
	serverName, serverPort := r.Host, ""
	if h, port, err := net.SplitHostPort(r.Host); err == nil {
		serverName, serverPort = h, port
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(la.String()); err == nil {
			serverPort = port // the port the request came in on, whatever Host says
		}
	}
	if serverPort == "" {
		serverPort = "80"
		if r.TLS != nil {
			serverPort = "443"
		}
	}
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	env := []string{
		"GATEWAY_INTERFACE=CGI/1.1",
		"SERVER_SOFTWARE=duilie",
		"SERVER_PROTOCOL=" + r.Proto,
		"SERVER_NAME=" + serverName,
		"SERVER_PORT=" + serverPort,
		"REQUEST_METHOD=" + r.Method,
		"REQUEST_URI=" + uri,
		"SCRIPT_NAME=",
		"PATH_INFO=" + r.URL.Path,
		"QUERY_STRING=" + r.URL.RawQuery,
	}
	if ip, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		env = append(env, "REMOTE_ADDR="+ip, "REMOTE_HOST="+ip, "REMOTE_PORT="+port)
	} else {
		env = append(env, "REMOTE_ADDR="+r.RemoteAddr, "REMOTE_HOST="+r.RemoteAddr)
	}
	if r.TLS != nil {
		env = append(env, "HTTPS=on")
	}
	if bodyLen > 0 {
		env = append(env, "CONTENT_LENGTH="+strconv.Itoa(bodyLen))
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		env = append(env, "CONTENT_TYPE="+ct)
	}
	for k, vs := range r.Header {
		if !plainHeaderName(k) {
			continue
		}
		name := "HTTP_" + strings.Map(metaChar, k)
		switch name {
		case "HTTP_PROXY", "HTTP_CONTENT_LENGTH", "HTTP_CONTENT_TYPE":
			continue
		}
		sep := ", "
		if name == "HTTP_COOKIE" {
			sep = "; "
		}
		env = append(env, name+"="+strings.Join(vs, sep))
	}
	slices.Sort(env)
	total := 0
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if len(kv) > MaxMetaVariable {
			return nil, fmt.Errorf("%w: %s is over %d bytes", errMetaTooBig, name, MaxMetaVariable)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("request holds a NUL byte in %s", name)
		}
		total += len(kv) + 1
	}
	if total > MaxMetaBytes {
		return nil, fmt.Errorf("%w: %d bytes of meta-variables, over %d", errMetaTooBig, total, MaxMetaBytes)
	}
	return env, nil
}

// plainHeaderName reports whether a header name holds only letters, digits and '-', so that
// no two such names (Go has canonicalized their case) map to one meta-variable.
func plainHeaderName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return k != ""
}

// metaChar maps a header name's character to a meta-variable name's (RFC 3875 §4.1.18).
func metaChar(r rune) rune {
	switch {
	case 'a' <= r && r <= 'z':
		return r - 'a' + 'A'
	case r == '-':
		return '_'
	}
	return r
}

// cgiResponse is a parsed CGI response (RFC 3875 §6).
type cgiResponse struct {
	status int
	header http.Header
	body   []byte
}

// hopHeaders are header fields a CGI script does not decide: the server frames the response.
var hopHeaders = []string{
	"Connection", "Content-Length", "Keep-Alive", "Proxy-Connection", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade",
}

// parseCGI parses a program's whole stdout as a CGI response: header lines (LF or CRLF), a
// blank line, the body. Status sets the status (3 digits, 200–599; the reason phrase is
// ignored); a Location without Status is 302 Found; otherwise 200, and then a Content-Type is
// required. A Location that is a local path is sent to the client like any other (no internal
// redirect). Content-Length and the hop-by-hop fields are dropped; the server frames the body.
func parseCGI(out []byte) (*cgiResponse, error) {
	res := &cgiResponse{header: http.Header{}}
	lines := 0
	rest := out
	for {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			if lines == 0 && len(rest) == 0 {
				return nil, errors.New("CGI response is empty")
			}
			return nil, errors.New("CGI response has no blank line after its headers")
		}
		line := bytes.TrimSuffix(rest[:nl], []byte("\r"))
		rest = rest[nl+1:]
		if len(line) == 0 {
			break
		}
		lines++
		name, val, ok := strings.Cut(string(line), ":")
		if !ok || !validName(name) {
			return nil, fmt.Errorf("CGI response header line %q is not a header", truncate(line))
		}
		val = strings.Trim(val, " \t")
		if !validValue(val) {
			return nil, fmt.Errorf("CGI response header %s has an invalid value", name)
		}
		if http.CanonicalHeaderKey(name) == "Status" {
			code, err := strconv.Atoi(val[:min(3, len(val))])
			if err != nil || len(val) < 3 || (len(val) > 3 && val[3] != ' ') || code < 200 || code > 599 {
				return nil, fmt.Errorf("CGI response status %q is not a status from 200 to 599", val)
			}
			res.status = code
			continue
		}
		res.header.Add(name, val)
	}
	if lines == 0 {
		return nil, errors.New("CGI response has no headers")
	}
	if res.status == 0 && res.header.Get("Location") != "" {
		res.status = http.StatusFound
	}
	if res.status == 0 {
		if res.header.Get("Content-Type") == "" {
			return nil, errors.New("CGI response has no Content-Type, Location or Status")
		}
		res.status = http.StatusOK
	}
	for _, k := range hopHeaders {
		res.header.Del(k)
	}
	res.body = rest
	return res, nil
}

// validName reports whether name is a header field name: an RFC 9110 token.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether v may be a header field value: no control character but tab.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func truncate(b []byte) []byte {
	if len(b) > 100 {
		return b[:100]
	}
	return b
}

// write sends the response.
func (res *cgiResponse) write(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range res.header {
		h[k] = vs
	}
	if bodyAllowed(res.status) {
		h.Set("Content-Length", strconv.Itoa(len(res.body)))
	}
	w.WriteHeader(res.status)
	if bodyAllowed(res.status) {
		_, _ = w.Write(res.body)
	}
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}
