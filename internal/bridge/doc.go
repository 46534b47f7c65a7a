// Package bridge runs programs in any language once per event and serves them the interface
// over HTTP (SPEC §13): each event gets a fresh process, and that process reaches
// 发送队列消息, 批量发送队列消息, 读取队列批次, 确认队列消息, 重试队列消息 and 读取入站事件种类 by
// POSTing to a URL private to its event.
//
// A Server is the bridge: one HTTP listener on a loopback address. A Runner runs the
// configured command: Runner.Queue is a duilie.Handler for queue events, Runner.Fetch an
// http.Handler that runs each request as a fetch event.
//
//	br, err := bridge.Listen("127.0.0.1:0", logger)
//	prog := &bridge.Runner{Command: []string{"python3", "app.py"}, Dir: configDir, Bridge: br, Logger: logger}
//	go h.Consume(ctx, consumerConfig, prog.Queue)
//	go http.ListenAndServe("127.0.0.1:8787", prog.Fetch(h))
//	…
//	h.Halt()    // at the end of a shutdown: running events are aborted, their programs killed
//	prog.Wait() // …and reaped, so none outlives the host
//
// The rest of this comment is for program authors.
//
// # The program
//
// The command runs in the configuration file's directory with the host's environment, the
// extra variables of Runner.Env and two more:
//
//	DUILIE_EVENT   queue or fetch
//	DUILIE_BRIDGE  the event's bridge URL, such as http://127.0.0.1:41234/e/K7QH2M5ZC4WPRX3B6N8TVJDA2Q
//
// and 127.0.0.1, localhost and ::1 added to NO_PROXY and no_proxy (after the host's own value),
// so that an HTTP client honouring a proxy set in the host's environment (http_proxy) still
// reaches the bridge directly: a proxy would otherwise receive the event's private URL and
// every message body.
//
// It runs in a process group of its own. When the event ends, whatever is left of that group is
// killed, so nothing a program starts outlives its event (a process that leaves the group, with
// setsid, is not tracked; if it still holds the program's stdout or stderr, the event stops
// waiting for them after OutputWait).
//
// Runner.Kill kills every running program's process group at once: duilie serve calls it on
// a second SIGINT or SIGTERM, before it exits, so no program outlives the host.
//
// On Linux a program's process group also dies with the host, however the host dies (kill -9,
// a panic): the program gets a parent-death signal, and a guard process (the host's own
// executable, re-run with DUILIE_PROGRAM_GUARD=1, which this package's init recognises) kills
// every group still running when the host's end of a pipe to it closes.
//
// A queue event's program has an empty stdin. Every line it writes to stdout or stderr is
// logged, with the event id, the queue and the stream, up to Runner.MaxOutput (1 MiB) per
// stream and event; the rest is read and dropped, and one WARN line says how many bytes. Its exit status decides the event:
//
//   - 0 is a normal end: messages with no ack or retry call succeed (SPEC §7).
//   - Any other status, or death by a signal, fails the event: messages with no call are
//     delivered again, with attempts + 1. An ack made before stays made.
//   - At the event's time limit (time_limit_ms) the whole process group is killed with SIGKILL
//     and the event fails with 执行超过时限.
//   - After a bridge call that aborts (a 500 reply) the whole process group is killed and the
//     event fails with that abort, whatever the program would have done next.
//
// # Fetch events: CGI/1.1
//
// For an HTTP request the program runs as a CGI/1.1 script (RFC 3875), mounted at the root:
//
//	REQUEST_METHOD, QUERY_STRING, REQUEST_URI, SCRIPT_NAME (empty), PATH_INFO (the whole
//	decoded path), CONTENT_LENGTH and CONTENT_TYPE (when there is a body or type),
//	SERVER_NAME, SERVER_PORT, SERVER_PROTOCOL, SERVER_SOFTWARE (duilie), GATEWAY_INTERFACE
//	(CGI/1.1), REMOTE_ADDR, REMOTE_HOST, REMOTE_PORT, HTTPS (on, for TLS), and HTTP_<NAME>
//	for every header (dashes as underscores; repeated headers joined with ", ", cookies with
//	"; "), Authorization included; not Proxy, Content-Length or Content-Type.
//
// A header whose name holds anything but letters, digits and '-' is dropped, as nginx and
// Apache drop it: X_Forwarded_For would become the same HTTP_X_FORWARDED_FOR as
// X-Forwarded-For, and a client could override what a proxy in front set. None of these
// names, and no HTTP_* variable, is inherited from the host's environment. Headers an
// environment cannot carry (a variable over MaxMetaVariable, 128 KiB, or all of them over
// MaxMetaBytes, 1 MiB) are answered 431 and run no event. The request body, read whole first
// (at most MaxRequestBytes; a bigger one is answered 413 and runs no event), is the program's
// stdin. The program writes its response on stdout: header
// lines, a blank line, the body.
//
//	Status: 201 Created
//	Content-Type: application/json
//
//	{"ok":true}
//
// Status (200–599) is optional; a Location without Status answers 302; otherwise the status
// is 200 and Content-Type is required. Content-Length and hop-by-hop headers are dropped: the
// host frames the body. There are no internal redirects: a Location that is a path is sent to
// the client. stderr is logged line by line.
//
// The response is held until the program exits. It is sent only if the exit status is 0 and the
// response is well-formed; otherwise the event fails and the client gets 500 Internal Server
// Error, whatever the program wrote before: a non-zero exit, an abort, the time limit, a
// response with a line that is not a header, without a blank line after the headers, or
// over MaxResponseBytes. The event runs to its end or its time limit even if the client goes
// away.
//
// # Bridge calls
//
// A call is POST $DUILIE_BRIDGE with a body that is a JSON array: the interface name, then
// its arguments.
//
//	["发送队列消息", binding, body, delaySeconds]   string, string (JSON text), integer
//	["批量发送队列消息", binding, items]            string, string (JSON text of an array)
//	["读取队列批次"]                                 result: the batch as JSON text
//	["确认队列消息", index]                          integer
//	["重试队列消息", index, delaySeconds]           integer, integer
//	["读取入站事件种类"]                             result: queue or fetch
//
// The reply's body is text/plain; charset=utf-8, without a trailing newline:
//
//   - 200: the result (the batch's JSON text, or the kind), or empty.
//   - 400: a catchable exception's message, such as 队列消息序号越界 or
//     消息体不是有效的 JSON 文字. The program may carry on.
//   - 500: an abort's message, such as 未授权的QUEUE绑定：X or 执行超过时限. The event has
//     failed and the program is being killed; every later call of the event gets the same 500.
//   - 404 (桥接地址不存在或其事件已结束): the URL is not an open event's (its event ended, or
//     it never was).
//   - 405 (桥接调用须用 POST, with Allow: POST): a method other than POST.
//
// A message body and a batch are JSON text inside a JSON string, so they are escaped twice:
//
//	["发送队列消息","PAGE_QUEUE","{\"kind\":\"page\",\"url\":\"/release/x\"}",30]
//
// Integer arguments are JSON numbers with an integral value within ±2^53: 30, 30.0 and 3e1 are
// all 30. The value is judged on the number as written, digit by digit, not as a double:
// 9007199254740993 (2^53+1) and 1e400 are out of range, 1.0000000000000000001 and 1e-400 are
// not integers. Strings may use any JSON escape (the name too), but may not hold an unpaired UTF-16
// surrogate, which a string of the interface cannot carry. A program may make calls
// concurrently. The array is decoded with duilie's own JSON decoder, so strings reach the
// interface exactly as sent; whitespace around the elements does not matter.
//
// # Malformed calls
//
// A call that is not of this shape aborts the event: the reply is 500 with
// 桥接调用无效：<what is wrong>, where what is wrong is one of these (N is an argument's
// position after the name, from 1):
//
//	调用超过 64 MiB                      the body is over MaxCallBytes
//	调用嵌套超过 2 层                     the body nests deeper than MaxCallDepth (2): a call is
//	                                     one array of scalars; this is seen as the body arrives,
//	                                     before anything else
//	调用不是有效的 JSON 文字              not JSON (including invalid UTF-8, a BOM, an empty body)
//	调用须为 JSON 数组                    JSON, but not an array
//	调用数组为空                          []
//	接口名须为字符串                      the first element is not a string
//	接口名含有不成对的代理项              the name holds an unpaired surrogate
//	未知的接口名 <name>                   not one of the six (the name cut at 64 characters, then …)
//	<name>需要 <n> 个参数，收到 <m> 个     wrong argument count
//	<name>的第 N 个参数须为字符串          a string argument that is not a string
//	<name>的第 N 个参数含有不成对的代理项  a string argument with an unpaired surrogate
//	<name>的第 N 个参数须为整数            an integer argument that is not a number, or not integral
//	<name>的第 N 个参数超出 ±2^53          an integer argument beyond ±2^53, integral or not
//
// For example 桥接调用无效：未知的接口名 foo, or 桥接调用无效：确认队列消息需要 1 个参数，收到 0 个.
// MaxCallBytes (64 MiB) is far above the largest call the interface can take (1 MiB of batch
// text grows to at most 6 MiB as a JSON string): below it, an input over the interface's limits
// gets the interface's own exception, a 400, exactly as a direct call would. Once a call over
// 1 MiB is answered, the memory it took (about three times its size) is handed back to the
// system, so large calls leave no grown heap behind.
//
// # From a shell, with curl
//
// Use --data-binary (-d drops newlines) and --noproxy '*' (so a proxy setting does not catch
// the loopback URL); -f makes curl fail on 400 and 500:
//
//	batch=$(curl -fsS --noproxy '*' --data-binary '["读取队列批次"]' "$DUILIE_BRIDGE") || exit 1
//	curl -fsS --noproxy '*' --data-binary '["确认队列消息",0]' "$DUILIE_BRIDGE" || exit 1
//
// # From Python, with the standard library
//
// http.client keeps one connection for all calls and, unlike urllib, ignores proxy settings:
//
//	import http.client, json, os, urllib.parse
//
//	url = urllib.parse.urlsplit(os.environ["DUILIE_BRIDGE"])
//	conn = http.client.HTTPConnection(url.hostname, url.port)
//
//	class QueueException(Exception):
//	    """A catchable exception of the interface (a 400 reply)."""
//
//	def call(name, *args):
//	    conn.request("POST", url.path, json.dumps([name, *args], ensure_ascii=False).encode())
//	    r = conn.getresponse()
//	    text = r.read().decode()
//	    if r.status == 400:
//	        raise QueueException(text)
//	    if r.status != 200:
//	        raise SystemExit(text)  # an abort: the host is killing this program
//	    return text
//
//	batch = json.loads(call("读取队列批次"))
//	for i, m in enumerate(batch["messages"]):
//	    try:
//	        call("发送队列消息", "PAGE_QUEUE", json.dumps(m["body"]), 0)
//	        call("确认队列消息", i)
//	    except QueueException:
//	        call("重试队列消息", i, 30)
package bridge
