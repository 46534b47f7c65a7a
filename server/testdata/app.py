"""The server tests' program: the standard library only.

A queue event reads its batch, acks every message and appends "acked <id>" to the file
named by its argument.
A fetch event answers by its path: /fast at once; /slow appends "slow <pid>" to that file and
sleeps for a minute (its time limit ends it).
"""
import http.client
import json
import os
import sys
import time
import urllib.parse


def call(name, *args):
    url = urllib.parse.urlsplit(os.environ["DUILIE_BRIDGE"])
    conn = http.client.HTTPConnection(url.hostname, url.port)
    conn.request("POST", url.path, json.dumps([name, *args], ensure_ascii=False).encode())
    r = conn.getresponse()
    text = r.read().decode()
    if r.status != 200:
        sys.exit(f"{name}: {r.status} {text}")
    return text


def record(line):
    with open(sys.argv[1], "a") as f:
        f.write(line + "\n")


if os.environ.get("DUILIE_EVENT") == "queue":
    batch = json.loads(call("读取队列批次"))
    for i, m in enumerate(batch["messages"]):
        call("确认队列消息", i)
        record(f"acked {m['id']}")
else:
    path = os.environ.get("PATH_INFO")
    if path == "/slow":
        record(f"slow {os.getpid()}")
        time.sleep(60)
    sys.stdout.write("Content-Type: text/plain\r\n\r\n" + path + "\n")
