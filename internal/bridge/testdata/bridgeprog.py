"""bridgeprog: a small client of the duilie bridge, used by the bridge tests.

A program in any language reaches the interface by POSTing a JSON array
["<interface name>", args...] to the URL in $DUILIE_BRIDGE. This module does
that with the standard library only:

    status, body = call("读取队列批次")          # 200 and the batch's JSON text
    status, body = call("确认队列消息", 0)       # 200 and "", or 400 and the exception

raw(body) posts any body, well-formed or not. Every reply is also appended to
the file named by $OUT (if set) as one JSON line {"status", "body", "type",
"allow"}, so a test sees exactly what the program saw; note(value) appends any
other value as {"note": value}.
"""
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse

BRIDGE = os.environ.get("DUILIE_BRIDGE", "")
EVENT = os.environ.get("DUILIE_EVENT", "")
_url = urllib.parse.urlsplit(BRIDGE)
_conn = None


def _record(obj):
    out = os.environ.get("OUT")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")


def note(value):
    """Append {"note": value} to $OUT."""
    _record({"note": value})


def request(method, body=b"", path=None):
    """Send one request to the bridge (or to another path on it); return (status, text)."""
    global _conn
    for attempt in (1, 2):
        if _conn is None:
            _conn = http.client.HTTPConnection(_url.hostname, _url.port, timeout=60)
        try:
            _conn.request(method, path or _url.path, body=body)
            r = _conn.getresponse()
            text = r.read().decode("utf-8")
            break
        except (ConnectionError, http.client.RemoteDisconnected):
            _conn.close()
            _conn = None  # the server closed a kept-alive connection: reconnect once
            if attempt == 2:
                raise
    _record({"status": r.status, "body": text, "type": r.getheader("Content-Type"), "allow": r.getheader("Allow")})
    return r.status, text


def raw(body):
    """POST body (str or bytes) as it is."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    return request("POST", body)


def call(name, *args):
    """Call an interface function: 发送队列消息, 批量发送队列消息, 读取队列批次,
    确认队列消息, 重试队列消息 or 读取入站事件种类."""
    return raw(json.dumps([name, *args], ensure_ascii=False))


def grandchild():
    """Start a process that sleeps for a minute, in this program's process group."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def pids(*procs):
    """Note this program's pid and its children's."""
    note({"pids": [os.getpid()] + [p.pid for p in procs]})
