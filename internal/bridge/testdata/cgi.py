"""A fetch program: a CGI/1.1 script that uses the bridge. The X-Mode request header picks
what it does:

  echo      (default) reply 201 with a JSON report of its meta-variables, its stdin and its
            bridge calls: 读取入站事件种类, 确认队列消息 0, and 发送队列消息 of the request
            body to binding Q
  fail      write a whole 200 response, then exit 3
  sleep     sleep for a minute
  redirect  reply with a Location header only
  noblank   write a header line and no blank line
  nostatus  write a body with no header at all
  send      send the request body to binding X (not permitted)
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bridgeprog import call  # noqa: E402

mode = os.environ.get("HTTP_X_MODE", "echo")
print("cgi.py running", mode, file=sys.stderr, flush=True)
out = sys.stdout.buffer

if mode == "echo":
    body = sys.stdin.buffer.read()
    report = {
        "env": {k: v for k, v in os.environ.items()
                if k.isupper() and not k.startswith(("PYTHON", "LC_", "LANG"))},
        "stdin": body.decode("utf-8"),
        "kind": call("读取入站事件种类"),
        "ack": call("确认队列消息", 0),
        "send": call("发送队列消息", "Q", body.decode("utf-8"), 0),
    }
    out.write(b"Status: 201 Created\r\nContent-Type: application/json\r\nX-Reply: yes\r\n"
              b"Content-Length: 1\r\n\r\n")
    out.write(json.dumps(report, ensure_ascii=False).encode("utf-8"))
elif mode == "fail":
    out.write(b"Content-Type: text/plain\n\nall is well\n")
    out.flush()
    sys.exit(3)
elif mode == "sleep":
    time.sleep(60)
elif mode == "redirect":
    out.write(b"Location: /elsewhere\n\n")
elif mode == "noblank":
    out.write(b"Content-Type: text/plain\n")
elif mode == "nostatus":
    out.write(b"just a body\n")
elif mode == "send":
    call("发送队列消息", "X", "1", 0)
    time.sleep(60)
