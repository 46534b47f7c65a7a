#!/usr/bin/env python3
"""The page-task consumer as a script on duilie's host (Python 3 standard library only).

duilie serve runs this script once per event, in this directory:
  - a queue event (DUILIE_EVENT=queue): read the batch, then ack or retry every task;
  - a fetch event (DUILIE_EVENT=fetch): an HTTP request to [app] listen, as a CGI/1.1 script:
    GET / answers a form, POST /tasks sends a task to PAGE_QUEUE (?delay=N delays it).
Every interface call is a POST of ["<interface name>", args...] to $DUILIE_BRIDGE.

Tasks are {"kind":"page"|"release","url":...,"version":...,"fail"?:true}. A task of another
version than PAGE_VERSION (default v8) is stale and acked; a task with "fail" stands in for a
failed render and is retried after min(300, 15*2^min(attempts,4)) seconds; every other task
is rendered and acked.
"""

import html
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

VERSION = os.environ.get("PAGE_VERSION", "v8")
BINDING = "PAGE_QUEUE"


class QueueException(Exception):
    """A catchable exception of the interface (the bridge answered 400)."""


class HostAbort(Exception):
    """A host abort (the bridge answered 500): the event has failed; stop at once."""


# The bridge is on this machine: never reach it through a proxy set in the environment
# (http_proxy would otherwise receive the event's private URL and every message body).
_bridge = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(name, *args):
    """Calls one of the interface's functions over the bridge and returns its result text."""
    data = json.dumps([name, *args], ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(os.environ["DUILIE_BRIDGE"], data=data, method="POST",
                                 headers={"Content-Type": "application/json; charset=utf-8"})
    try:
        with _bridge.open(req) as resp:
            return resp.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        message = e.read().decode("utf-8")
        if e.code == 400:
            raise QueueException(message) from None
        raise HostAbort(message) from None


def log(*parts):
    # stderr: the host logs it with the event's id. (stdout is a fetch event's response.)
    print(*parts, file=sys.stderr, flush=True)


def backoff(attempts):
    return min(300, 15 * 2 ** min(attempts, 4))


def queue_event():
    batch = json.loads(call("读取队列批次"))
    for i, m in enumerate(batch["messages"]):
        task, attempts = m["body"], m["attempts"]
        if not isinstance(task, dict) or task.get("kind") not in ("page", "release") or not task.get("url"):
            log(f"not a page task: acked and dropped id={m['id']}")
            call("确认队列消息", i)
        elif task.get("version") != VERSION:
            log(f"stale task: acked url={task['url']} version={task.get('version')} current={VERSION}")
            call("确认队列消息", i)
        elif task.get("fail"):
            delay = backoff(attempts)
            log(f"render failed: retry url={task['url']} attempts={attempts} delay_s={delay}")
            call("重试队列消息", i, delay)
        else:
            log(f"rendered {task['kind']} url={task['url']} version={task['version']} attempts={attempts}")
            call("确认队列消息", i)


def respond(status, body, content_type="text/plain; charset=utf-8", extra=()):
    out = sys.stdout.buffer
    out.write(f"Status: {status}\r\nContent-Type: {content_type}\r\n".encode())
    for header in extra:
        out.write(f"{header}\r\n".encode())
    out.write(b"\r\n")
    out.write(body.encode("utf-8"))
    out.flush()


FORM = """<!doctype html>
<meta charset="utf-8">
<title>page tasks</title>
<h1>Send a page task</h1>
<form method="post" action="/tasks">
<p><label>kind <select name="kind"><option>page</option><option>release</option></select></label>
<p><label>url <input name="url" value="/release/x"></label>
<p><label>version <input name="version" value="{version}"></label>
<p><label><input type="checkbox" name="fail" value="1"> fail (retried with backoff)</label>
<p><button>send</button>
</form>
"""


def fetch_event():
    method = os.environ.get("REQUEST_METHOD", "GET")
    path = os.environ.get("PATH_INFO") or urllib.parse.urlsplit(os.environ.get("REQUEST_URI", "/")).path or "/"
    query = urllib.parse.parse_qs(os.environ.get("QUERY_STRING", ""))
    if path == "/" and method == "GET":
        respond("200 OK", FORM.format(version=html.escape(VERSION)), "text/html; charset=utf-8")
        return
    if path != "/tasks":
        respond("404 Not Found", "not found\n")
        return
    if method != "POST":
        respond("405 Method Not Allowed", "method not allowed\n", extra=["Allow: POST"])
        return
    try:
        delay = int(query.get("delay", ["0"])[0])
    except ValueError:
        respond("400 Bad Request", "delay must be an integer number of seconds\n")
        return
    length = int(os.environ.get("CONTENT_LENGTH") or 0)
    raw = sys.stdin.buffer.read(length) if length > 0 else b""
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        body = raw.decode("utf-8", "surrogateescape")  # the host says it is not JSON
    # The form posts kind=...&url=...; anything else (curl -d sends JSON with the form's content
    # type) is the task's JSON text, checked by the host.
    form = urllib.parse.parse_qs(body)
    if "kind" in form and "url" in form and not body.lstrip().startswith("{"):
        body = json.dumps({"kind": form["kind"][0], "url": form["url"][0],
                           "version": form.get("version", [""])[0],
                           **({"fail": True} if "fail" in form else {})})
    try:
        call("发送队列消息", BINDING, body, delay)
    except QueueException as e:
        respond("400 Bad Request", f"{e}\n")
        return
    respond("202 Accepted", "queued\n")


def main():
    event = os.environ.get("DUILIE_EVENT")
    if event == "queue":
        queue_event()
    elif event == "fetch":
        fetch_event()
    else:
        sys.exit("app.py runs under duilie serve: see examples/page-python/duilie.toml")


if __name__ == "__main__":
    try:
        main()
    except HostAbort as abort:
        log(f"aborted: {abort}")
        sys.exit(1)
