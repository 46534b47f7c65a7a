// Unit tests of a Worker built by `duilie worker build`, run in node as a Worker's own unit tests
// would run it: the entry's fetch and queue handlers called directly, with mock Queue bindings
// and mock MessageBatches of the shapes Cloudflare's runtime and the reference host hand over
// (timestamps as Dates and as numbers), and the console recorded. TestWorkerUnit (unit_test.go)
// builds the conformance program (testdata/conformance) and runs
//
//   node unit.mjs DIR
//
// where DIR holds the built Worker: worker.mjs as built ([worker] log_events on) and
// unit-entry.mjs, the same program's entry with log_events off and a 300 ms time limit. One node
// process runs every test, in order, and reports them as TAP. It needs node 20.6 or later, and
// nothing from npm.
import { register } from "node:module";
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

// A Worker imports app.wasm as a compiled WebAssembly.Module (wrangler's CompiledWasm rule);
// node needs a hook for it.
register(
  "data:text/javascript," +
    encodeURIComponent(`
export async function load(url, context, next) {
  if (!url.endsWith(".wasm")) return next(url, context);
  return {
    format: "module",
    shortCircuit: true,
    source: "import { readFileSync } from 'node:fs';" +
      "export default new WebAssembly.Module(readFileSync(new URL(" + JSON.stringify(url) + ")));",
  };
}`),
);

const dir = resolve(process.argv[2] || ".");
// The entry under test last: both entries send the program's stdout and stderr to the console,
// and the last one loaded holds the lines still open (see the entry's flush).
const logged = (await import(pathToFileURL(`${dir}/worker.mjs`))).default;
const worker = (await import(pathToFileURL(`${dir}/unit-entry.mjs`))).default;

// console records every console call made while fn runs, as [method, text].
async function console_(fn) {
  const lines = [];
  const saved = {};
  for (const m of ["log", "debug", "info", "warn", "error"]) {
    saved[m] = console[m];
    console[m] = (...args) => lines.push([m, args.join(" ")]);
  }
  try {
    await fn();
  } finally {
    Object.assign(console, saved);
  }
  return lines;
}

// A Queue binding that records its calls, as a Worker's unit test mocks one; failure, when set,
// rejects every call with it.
function queueBinding() {
  return {
    calls: [],
    failure: "",
    async send(...args) {
      this.calls.push(["send", ...args]);
      if (this.failure) throw new Error(this.failure);
    },
    async sendBatch(...args) {
      this.calls.push(["sendBatch", ...args]);
      if (this.failure) throw new Error(this.failure);
    },
  };
}

// The conformance program's env: ABSENT, which duilie.toml configures, is left out; so is every
// binding duilie.toml does not permit or configure, except the ones named to show that the env
// does not make a binding usable.
function deployment() {
  const env = { PAGE_QUEUE: queueBinding(), UNPERMITTED: queueBinding(), NOT_CONFIGURED: queueBinding(), GREETING: "你好" };
  return { env, calls: () => [env.PAGE_QUEUE, env.UNPERMITTED, env.NOT_CONFIGURED].flatMap((q) => q.calls) };
}

const ctx = { waitUntil() {}, passThroughOnException() {} };

function get(path) {
  return new Request(`http://worker${path}`);
}

function post(path, body) {
  return new Request(`http://worker${path}`, { method: "POST", body });
}

// A MessageBatch of msgs ({id, timestamp, attempts, body}), each message with ack() and
// retry(options) recording their calls in calls, as [id, "ack"] or [id, "retry", options?].
function messageBatch(queue, msgs) {
  const calls = [];
  const messages = msgs.map((m) => ({
    ...m,
    ack(...args) {
      calls.push([m.id, "ack", ...args]);
    },
    retry(...args) {
      calls.push([m.id, "retry", ...args]);
    },
  }));
  return {
    calls,
    batch: {
      queue,
      messages,
      ackAll() {
        calls.push(["*", "ackAll"]);
      },
      retryAll(...args) {
        calls.push(["*", "retryAll", ...args]);
      },
    },
  };
}

// rejectsWith checks that promise rejects with an Error whose message is exactly message.
async function rejectsWith(promise, message) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, `rejected with ${e}, not an Error`);
    assert.equal(e.message, message);
    return true;
  });
}

async function text(response, status) {
  assert.equal(response.status, status);
  return response.text();
}

test("send: the binding gets the value and {contentType: json}; the console is the program's", async () => {
  const { env } = deployment();
  const lines = await console_(async () => {
    assert.equal(await text(await worker.fetch(post("/send?binding=PAGE_QUEUE&delay=0", '{"kind":"page", "url":"/x"}'), env, ctx), 200), "ok");
    assert.equal(await text(await worker.fetch(post("/send?binding=PAGE_QUEUE&delay=30", "1"), env, ctx), 200), "ok");
    assert.equal(await text(await worker.fetch(post("/send?binding=PAGE_QUEUE&delay=43201", "1"), env, ctx), 400), "延迟秒数须在 0 至 43200 之间");
  });
  assert.deepEqual(env.PAGE_QUEUE.calls, [
    ["send", { kind: "page", url: "/x" }, { contentType: "json" }],
    ["send", 1, { contentType: "json", delaySeconds: 30 }],
  ]);
  assert.deepEqual(lines, []);
});

test("sendBatch: the items in order with contentType json; a rejection's message verbatim", async () => {
  const { env } = deployment();
  const lines = await console_(async () => {
    const items = '[{"body":1},{"body":"s","delaySeconds":5},{"body":{"body":1}}]';
    assert.equal(await text(await worker.fetch(post("/send-batch?binding=PAGE_QUEUE", items), env, ctx), 200), "ok");
    assert.equal(await text(await worker.fetch(post("/send-batch?binding=PAGE_QUEUE", "[]"), env, ctx), 400), "批量消息不得为空");
    env.PAGE_QUEUE.failure = "Queue is full";
    assert.equal(await text(await worker.fetch(post("/send-batch?binding=PAGE_QUEUE", '[{"body":2}]'), env, ctx), 400), "队列批量发送失败：Queue is full");
    assert.equal(await text(await worker.fetch(post("/send?binding=PAGE_QUEUE", "3"), env, ctx), 400), "队列发送失败：Queue is full");
  });
  assert.deepEqual(env.PAGE_QUEUE.calls, [
    ["sendBatch", [{ body: 1, contentType: "json" }, { body: "s", contentType: "json", delaySeconds: 5 }, { body: { body: 1 }, contentType: "json" }]],
    ["sendBatch", [{ body: 2, contentType: "json" }]],
    ["send", 3, { contentType: "json" }],
  ]);
  assert.deepEqual(lines, []);
});

test("readBatch: ids, attempts, timestamps as Dates (Workers) or numbers (the reference host) in ms, bodies", async () => {
  const { env } = deployment();
  const { batch, calls } = messageBatch("read", [
    { id: "a1", timestamp: new Date(1700000000123), attempts: 1, body: { x: 1 } },
    { id: "a2", timestamp: 1700000000456, attempts: 2, body: "s" },
    { id: "a3", timestamp: 1700000000789, attempts: 5, body: [1, null, true] },
  ]);
  const lines = await console_(async () => {
    assert.equal(await worker.queue(batch, env, ctx), undefined);
  });
  assert.deepEqual(lines, [
    ["log", 'READ {"queue":"read","messages":[{"id":"a1","attempts":1,"timestamp":1700000000123,"body":{"x":1}},' +
      '{"id":"a2","attempts":2,"timestamp":1700000000456,"body":"s"},{"id":"a3","attempts":5,"timestamp":1700000000789,"body":[1,null,true]}]}'],
  ]);
  assert.deepEqual(calls, []);
});

test("ack and retry: ack(), retry({delaySeconds}), retry() for 0, nothing for a message without a call", async () => {
  const { env } = deployment();
  const settle = messageBatch("settle", [
    { id: "s1", timestamp: 1, attempts: 1, body: 1 },
    { id: "s2", timestamp: 1, attempts: 1, body: 2 },
    { id: "s3", timestamp: 1, attempts: 1, body: 3 },
  ]);
  const retry0 = messageBatch("retry0", [{ id: "r1", timestamp: new Date(1), attempts: 1, body: 1 }]);
  const lines = await console_(async () => {
    assert.equal(await worker.queue(settle.batch, env, ctx), undefined);
    assert.equal(await worker.queue(retry0.batch, env, ctx), undefined);
  });
  assert.deepEqual(settle.calls, [["s1", "ack"], ["s2", "retry", { delaySeconds: 30 }]]);
  assert.deepEqual(retry0.calls, [["r1", "retry"]]);
  assert.deepEqual(lines, []);
});

test("aborts in a fetch event reject with the abort: bindings, a binding the env lacks, the time limit", async () => {
  const { env, calls } = deployment();
  const lines = await console_(async () => {
    await rejectsWith(worker.fetch(post("/send?binding=UNPERMITTED", "1"), env, ctx), "未授权的QUEUE绑定：UNPERMITTED");
    await rejectsWith(worker.fetch(post("/send-batch?binding=UNPERMITTED", '[{"body":1}]'), env, ctx), "未授权的QUEUE绑定：UNPERMITTED");
    await rejectsWith(worker.fetch(post("/send?binding=NOT_CONFIGURED", "1"), env, ctx), "绑定不存在：NOT_CONFIGURED");
    // duilie.toml configures ABSENT, but the Worker's env, the deployment, does not.
    await rejectsWith(worker.fetch(post("/send?binding=ABSENT", "1"), env, ctx), "绑定不存在：ABSENT");
    await rejectsWith(worker.fetch(post("/send?binding=PAGE_QUEUE", "1"), {}, ctx), "绑定不存在：PAGE_QUEUE");
    await rejectsWith(worker.fetch(get("/sleep"), env, ctx), "执行超过时限");
  });
  assert.deepEqual(calls(), []);
  assert.deepEqual(lines, []);
});

test("aborts in a queue event reject with the abort: a binding, the time limit, a body nested too deep", async () => {
  const { env, calls } = deployment();
  const deep = (n) => {
    let v = 1;
    for (let i = 0; i < n; i++) v = [v];
    return v;
  };
  const aborted = messageBatch("abort", [{ id: "b1", timestamp: 1, attempts: 1, body: 1 }]);
  const sleep = messageBatch("sleep", [{ id: "z1", timestamp: 1, attempts: 1, body: 1 }]);
  const tooDeep = messageBatch("read", [{ id: "d33", timestamp: 1, attempts: 1, body: deep(33) }]);
  const lines = await console_(async () => {
    await rejectsWith(worker.queue(aborted.batch, env, ctx), "未授权的QUEUE绑定：UNPERMITTED");
    await rejectsWith(worker.queue(sleep.batch, env, ctx), "执行超过时限");
    await rejectsWith(worker.queue(tooDeep.batch, env, ctx), "宿主结果嵌套过深");
  });
  assert.deepEqual(calls(), []);
  assert.deepEqual([...aborted.calls, ...sleep.calls, ...tooDeep.calls], []);
  assert.deepEqual(lines, [["log", "READ abort: 宿主结果嵌套过深"]]);
});

test("a failed event rejects with its failure: a panic's message, with the Go stack", async () => {
  const { env } = deployment();
  let stack;
  const lines = await console_(async () => {
    await assert.rejects(worker.fetch(get("/panic"), env, ctx), (e) => {
      assert.ok(e instanceof Error);
      assert.equal(e.message, "panic: on purpose");
      stack = e.stack;
      return true;
    });
    const failing = messageBatch("conf-q", [{ id: "f1", timestamp: 1, attempts: 1, body: { fail_until: 9 } }]);
    await rejectsWith(worker.queue(failing.batch, env, ctx), "message f1 fails until attempt 9");
  });
  assert.match(stack, /^Error: panic: on purpose\ngoroutine \d+/);
  assert.match(stack, /main\.fetch/);
  assert.equal(lines.length, 1);
  assert.match(lines[0][1], /^CONSUMED queue /);
});

test("the console: stdout at log, stderr at error, log/slog by level without time or level", async () => {
  const { env } = deployment();
  const lines = await console_(async () => {
    assert.equal(await text(await worker.fetch(get("/log"), env, ctx), 200), "logged");
  });
  assert.deepEqual(lines, [
    ["log", "OUT line"],
    ["error", "ERR line"],
    ["info", "by log"],
    ["info", "an info k=1"],
    ["warn", "a warning k=2"],
    ["error", 'an error k=3 err="two words"'],
    ["debug", "own debug event=fetch k=4"],
    ["log", "OUT without a newline"], // written when the event ends
  ]);
});

test("the host's line per event: none by default, at console.debug with [worker] log_events", async () => {
  const { env } = deployment();
  const quiet = await console_(async () => {
    assert.equal(await text(await worker.fetch(get("/env?name=GREETING"), env, ctx), 200), "你好");
  });
  assert.deepEqual(quiet, []);
  const read = messageBatch("retry0", [{ id: "l1", timestamp: 1, attempts: 1, body: 1 }]);
  const lines = await console_(async () => {
    assert.equal(await text(await logged.fetch(get("/env?name=GREETING"), env, ctx), 200), "你好");
    assert.equal(await logged.queue(read.batch, env, ctx), undefined);
    await rejectsWith(logged.fetch(post("/send?binding=ABSENT", "1"), env, ctx), "绑定不存在：ABSENT");
  });
  assert.equal(lines.length, 3, JSON.stringify(lines));
  assert.deepEqual(lines.map(([m]) => m), ["debug", "debug", "debug"]);
  assert.match(lines[0][1], /^fetch event event=[0-9a-f]{16} method=GET path=\/env status=200 outcome=ok duration=\S+$/);
  assert.match(lines[1][1], /^queue event event=[0-9a-f]{16} queue=retry0 batch=1 outcome=ok duration=\S+ acked=0 retried=1 dead=0 dropped=0$/);
  assert.match(lines[2][1], /^fetch event event=[0-9a-f]{16} method=POST path=\/send status=500 outcome=aborted duration=\S+ err=绑定不存在：ABSENT code=no_binding gloss="the binding is permitted, but no producer maps it to a queue" detail="configured: PAGE_QUEUE, UNPERMITTED"$/);
});

test("odd values in messages are read, not crashed on: ids, attempts, timestamps", async () => {
  const { env } = deployment();
  const { batch } = messageBatch("read", [
    { id: 7, attempts: "2", timestamp: "2024-01-01", body: 1 },
    { id: true, attempts: NaN, timestamp: new Date(NaN), body: 2 },
    { id: undefined, attempts: 2.7, timestamp: 1.5, body: 3 },
    { id: {}, attempts: -1, timestamp: { getTime() { throw new Error("no time"); } }, body: 4 },
    { id: 10n, attempts: 1e12, timestamp: 8.64e16, body: 5 },
    { attempts: Infinity, timestamp: -1000, body: 6 },
  ]);
  const lines = await console_(async () => {
    assert.equal(await worker.queue(batch, env, ctx), undefined);
  });
  const m = (id, attempts, timestamp, body) => ({ id, attempts, timestamp, body });
  assert.deepEqual(lines.length, 1);
  assert.deepEqual(JSON.parse(lines[0][1].replace(/^READ /, "")), {
    queue: "read",
    messages: [m("7", 1, 0, 1), m("true", 1, 0, 2), m("", 2, 1, 3), m("", 0, 0, 4), m("", 2147483647, 0, 5), m("", 2147483647, -1000, 6)],
  });
});

test("malformed batches fail their event with a clear error, and the program runs on", async () => {
  const { env } = deployment();
  const count = async () => Number(await text(await worker.fetch(get("/count"), env, ctx), 200));
  const before = await count();
  const throwing = new Proxy({}, { get() { throw new Error("no access"); } });
  const noMethods = { queue: "settle", messages: [{ id: "s1", timestamp: 1, attempts: 1, body: 1 }, { id: "s2", timestamp: 1, attempts: 1, body: 2 }] };
  const throwingAck = messageBatch("settle", [{ id: "s1", timestamp: 1, attempts: 1, body: 1 }, { id: "s2", timestamp: 1, attempts: 1, body: 2 }]);
  throwingAck.batch.messages[0].ack = () => {
    throw new Error("already acked");
  };
  const many = Array.from({ length: 101 }, (_, i) => ({ id: `m${i}`, timestamp: 1, attempts: 1, body: i }));
  const lines = await console_(async () => {
    await rejectsWith(worker.queue(undefined, env, ctx), "duilie: the queue handler's first argument is undefined, not a MessageBatch");
    await rejectsWith(worker.queue({ queue: "read", messages: "x" }, env, ctx), "duilie: the MessageBatch's messages are a string, not an array");
    await rejectsWith(worker.queue({ queue: "read" }, env, ctx), "duilie: the MessageBatch's messages are undefined, not an array");
    await rejectsWith(worker.queue({ queue: "read", messages: many }, env, ctx), "duilie: the MessageBatch has 101 messages; a batch holds at most 100");
    await rejectsWith(worker.queue(throwing, env, ctx), "duilie: the MessageBatch's messages are undefined, not an array");
    // A message that is null, or throws on every property, has no JSON body.
    await rejectsWith(worker.queue({ queue: "read", messages: [{ id: "a", body: 1 }, null] }, env, ctx), "队列消息正文不是 JSON 值：序号 1");
    await rejectsWith(worker.queue({ queue: "read", messages: [throwing] }, env, ctx), "队列消息正文不是 JSON 值：序号 0");
    // Messages without ack() and retry(), or whose ack() throws: every call is made, and the
    // event fails naming each that failed.
    await rejectsWith(worker.queue(noMethods, env, ctx),
      'duilie: messages[0] (id "s1"): ack() is not a function of the message\nduilie: messages[1] (id "s2"): retry() is not a function of the message');
    await rejectsWith(worker.queue(throwingAck.batch, env, ctx), 'duilie: messages[0] (id "s1"): already acked');
    await rejectsWith(worker.fetch(undefined, env, ctx), "duilie: the fetch handler's first argument is undefined, not a Request");
    // A request without headers: the adapter's own code throws, and only this event fails.
    await assert.rejects(worker.fetch({ method: "GET", url: "http://worker/count" }, env, ctx),
      { name: "Error", message: /^duilie: a JavaScript exception in the Worker's adapter: .*iterable/ });
  });
  assert.deepEqual(throwingAck.calls, [["s2", "retry", { delaySeconds: 30 }]]);
  assert.deepEqual(lines, [
    ["log", "READ exception: 队列消息正文不是 JSON 值：序号 1"],
    ["log", "READ exception: 队列消息正文不是 JSON 值：序号 0"],
  ]);
  // The same program, still running: nothing crashed it.
  assert.equal(await count(), before + 1);
});
