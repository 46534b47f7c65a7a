// Runs Workers built by `duilie worker build` in workerd, through Miniflare, on real local
// Queue bindings: each Worker's wrangler.jsonc becomes its Miniflare options (queue producers,
// consumers and their settings), so what runs is what `wrangler deploy` would upload.
//
//   node harness.mjs DIR            run one built Worker; its fetch handler listens on
//                                   http://127.0.0.1:8787 (PORT overrides), its console
//                                   calls are printed as "(method) text", Ctrl-C stops it
//   node harness.mjs --spec FILE    what the tests run: several Workers, a recording Queue
//                                   binding, and a control server (below)
//
// The npm packages come from $DUILIE_MINIFLARE_DIR (default ~/.cache/duilie/miniflare), which
// install.sh fills from package-lock.json.
//
// A spec is {"workers": [{"name", "dir", "consume": bool, "record": BINDING, "drop": [BINDING],
// "vars": {NAME: "value"}}]}: consume keeps the Worker's consumers; record replaces a binding by
// the recorder's RecordingQueue, which records each send and sendBatch call, exactly as the
// binding received it, and passes it on to the real queue; drop leaves bindings out of env.
//
// The control server (its URL is the first line on stdout, as {"url": …}) answers:
//   ANY  /fetch/<worker>/<path>   the request (method, query, headers, body), dispatched to
//                                 that Worker's fetch handler; the answer is its response
//   POST /queue/<worker>/<queue>  a MessageBatch of the JSON array of
//                                 {id, timestamp (ms), attempts, body | foreign}, dispatched to
//                                 the Worker's queue handler; the answer is workerd's
//                                 {outcome, explicitAcks, retryMessages, …}. foreign is a
//                                 body that is not JSON: "date", "map", "bytes", "undefined",
//                                 "nan", "bigint", "cycle"
//   GET  /calls                   the recorded calls, [{op, body, options} | {op, items}]
//   POST /fail                    the recorder rejects every call with the request's body as
//                                 the error message; an empty body stops that
//   POST /reset                   forgets the calls
//   GET  /logs                    every console call of the Workers, as "(method) text": the
//                                 program's stdout is (log), its stderr (error), its log/slog
//                                 lines (debug), (info), (warn) or (error) by level
// It listens on 127.0.0.1 only. The harness ends when its stdin closes.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { Miniflare, workerOptions } from "./miniflare.mjs";

// The recorder: a Worker whose RecordingQueue entrypoint stands in for a Queue binding.
const recorderScript = `
import { WorkerEntrypoint } from "cloudflare:workers";
const calls = [];
let failure = "";
export class RecordingQueue extends WorkerEntrypoint {
  async send(body, options) {
    calls.push({ op: "send", args: arguments.length, body: JSON.stringify(body), options: JSON.stringify(options) });
    if (failure) throw new Error(failure);
    await this.env.REAL.send(body, options);
  }
  async sendBatch(items) {
    calls.push({ op: "sendBatch", args: arguments.length, items: JSON.stringify(items) });
    if (failure) throw new Error(failure);
    await this.env.REAL.sendBatch(items);
  }
}
export default {
  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (path === "/calls") return Response.json(calls);
    if (path === "/reset") { calls.length = 0; return new Response("ok"); }
    if (path === "/fail") { failure = await request.text(); return new Response("ok"); }
    return new Response("not found", { status: 404 });
  },
};`;

// foreign makes a body that is not a JSON value, as a foreign producer's message would be.
function foreign(kind) {
  switch (kind) {
    case "date": return new Date(0);
    case "map": return new Map([["a", 1]]);
    case "bytes": return new Uint8Array([1, 2, 3]).buffer;
    case "undefined": return { a: undefined };
    case "nan": return { n: NaN };
    case "bigint": return 1n;
    case "cycle": { const o = {}; o.self = o; return o; }
  }
  throw new Error("unknown foreign body " + kind);
}

async function main() {
  const args = process.argv.slice(2);
  let spec;
  if (args[0] === "--spec") spec = JSON.parse(readFileSync(args[1], "utf8"));
  else if (args.length === 1) spec = { workers: [{ dir: args[0] }], serve: true };
  else {
    console.error("usage: node harness.mjs DIR | node harness.mjs --spec FILE");
    process.exit(64);
  }
  let recordedQueue;
  const workers = spec.workers.map((w) => {
    const { options, recorded } = workerOptions(w);
    recordedQueue ||= recorded;
    return options;
  });
  if (recordedQueue) {
    workers.push({
      name: "recorder",
      modules: true,
      script: recorderScript,
      compatibilityDate: workers[0].compatibilityDate,
      queueProducers: { REAL: { queueName: recordedQueue } },
    });
  }
  const logs = [];
  const mf = new Miniflare({
    workers,
    host: "127.0.0.1",
    port: spec.serve ? Number(process.env.PORT || 8787) : 0,
    // Each console call of the Workers, with its method: "(info) rendered …".
    handleStructuredLogs({ level, message }) {
      const line = `(${level}) ${message}`;
      logs.push(line);
      if (spec.serve) console.log(line);
    },
  });
  const url = await mf.ready;
  if (spec.serve) {
    console.log(`${workers[0].name}: fetch events on ${url}`);
    process.on("SIGINT", () => mf.dispose().then(() => process.exit(0)));
    return;
  }

  const server = createServer(async (req, res) => {
    try {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks);
      const u = new URL(req.url, "http://x");
      const [, what, name, ...rest] = u.pathname.split("/");
      let answer;
      if (what === "fetch") {
        const w = await mf.getWorker(name);
        const headers = Object.entries(req.headers).filter(([k]) => !["host", "connection", "content-length"].includes(k));
        const r = await w.fetch("http://worker/" + rest.join("/") + u.search, {
          method: req.method,
          headers,
          body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
        });
        const out = [];
        for (const [k, v] of r.headers) if (k !== "content-length") out.push(k, v);
        res.writeHead(r.status, out);
        res.end(Buffer.from(await r.arrayBuffer()));
        return;
      } else if (what === "queue") {
        const msgs = JSON.parse(body.toString()).map((m) => ({
          id: m.id,
          timestamp: new Date(m.timestamp),
          attempts: m.attempts,
          body: "foreign" in m ? foreign(m.foreign) : m.body,
        }));
        answer = await (await mf.getWorker(name)).queue(rest.join("/"), msgs);
      } else if (what === "logs") {
        answer = logs;
      } else if (["calls", "fail", "reset"].includes(what)) {
        const r = await (await mf.getWorker("recorder")).fetch("http://recorder/" + what, { method: "POST", body });
        answer = await r.json().catch(() => "ok");
      } else {
        res.writeHead(404).end("not found");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(answer));
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" }).end(String(e && e.stack || e));
    }
  });
  server.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }));
  });
  process.stdin.on("end", async () => {
    server.close();
    await mf.dispose();
    process.exit(0);
  });
  process.stdin.resume();
}

main().catch((e) => {
  console.error(e && e.stack || e);
  process.exit(70);
});
