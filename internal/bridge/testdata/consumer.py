"""A queue consumer as a program per event: read the batch, ack every message, exit 0.

Run by BenchmarkScriptConsumer. It keeps one HTTP connection to the bridge for all
its calls. With ACK=none it only reads the batch: exit 0 then succeeds every message.
"""
import http.client
import json
import os
import sys
import urllib.parse

url = urllib.parse.urlsplit(os.environ["DUILIE_BRIDGE"])
conn = http.client.HTTPConnection(url.hostname, url.port)


def call(*call):
    conn.request("POST", url.path, json.dumps(call, ensure_ascii=False).encode())
    r = conn.getresponse()
    body = r.read().decode()
    if r.status != 200:
        sys.exit(f"{call[0]}: {r.status} {body}")
    return body


batch = json.loads(call("读取队列批次"))
if os.environ.get("ACK") != "none":
    for i in range(len(batch["messages"])):
        call("确认队列消息", i)
