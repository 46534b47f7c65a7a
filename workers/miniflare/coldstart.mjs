// Measures a Go Worker's cold start in workerd against the same page-task Worker written in
// JavaScript, side by side in one run:
//
//   go run ./cmd/duilie worker build --out /tmp/page-go ./examples/page-go
//   node workers/miniflare/coldstart.mjs /tmp/page-go [runs]
//
// Each run starts Miniflare afresh (new Miniflare and mf.ready: workerd starts and compiles the
// modules), then times the first GET / (the Go program starts: WebAssembly.Instance and main),
// the first POST /tasks, and the median of 20 more GET /. The Go and JavaScript Workers take
// turns; the table has the median of every column over the runs.
import { readFileSync, statSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join, resolve } from "node:path";
import { Miniflare, readWrangler, workerOptions } from "./miniflare.mjs";

const dir = resolve(process.argv[2] || "");
const runs = Number(process.argv[3] || 5);
const wrangler = readWrangler(dir);

// The baseline: the page-task fetch handler in plain JavaScript, on the same queue.
const jsWorker = `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/" && request.method === "GET") {
      return new Response("<!doctype html><title>page tasks</title><form method=post action=/tasks></form>",
        { headers: { "content-type": "text/html; charset=utf-8" } });
    }
    if (url.pathname === "/tasks" && request.method === "POST") {
      await env.PAGE_QUEUE.send(await request.json(), { contentType: "json" });
      return new Response("queued\\n", { status: 202 });
    }
    return new Response("not found", { status: 404 });
  },
};`;

// options runs the built Worker, or the baseline with the same queue producers, as "w".
function options(kind) {
  const { options: go } = workerOptions({ name: "w", dir, consume: false });
  if (kind === "go") return go;
  const { name, compatibilityDate, queueProducers } = go;
  return { name, modules: true, compatibilityDate, queueProducers, script: jsWorker };
}

async function time(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function once(kind) {
  let mf;
  const ready = await time(async () => {
    mf = new Miniflare({ ...options(kind), handleRuntimeStdio() {} });
    await mf.ready;
  });
  const get = async () => {
    const r = await mf.dispatchFetch("http://w/");
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`GET / = ${r.status}`);
  };
  const first = await time(get);
  const post = await time(async () => {
    const r = await mf.dispatchFetch("http://w/tasks", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"kind":"page","url":"/release/x","version":"v8"}',
    });
    await r.arrayBuffer();
    if (r.status !== 202) throw new Error(`POST /tasks = ${r.status}`);
  });
  const warm = [];
  for (let i = 0; i < 20; i++) warm.push(await time(get));
  await mf.dispose();
  return { ready, first, post, warm: median(warm) };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const results = { js: [], go: [] };
for (let i = 0; i < runs; i++) {
  for (const kind of ["js", "go"]) results[kind].push(await once(kind));
}
const wasm = readFileSync(join(dir, "app.wasm"));
const mib = (n) => (n / (1 << 20)).toFixed(2) + " MiB";
console.log(`app.wasm ${mib(statSync(join(dir, "app.wasm")).size)} raw, ${mib(gzipSync(wasm, { level: 9 }).length)} gzipped`);
console.log(`median of ${runs} runs, ms    start (mf.ready)  first GET /  first POST /tasks  warm GET /`);
for (const [kind, rs] of Object.entries(results)) {
  const col = (k) => median(rs.map((r) => r[k])).toFixed(1).padStart(10);
  const label = kind === "go" ? "Go (duilie worker build)" : "JavaScript baseline";
  console.log(`${label.padEnd(28)}${col("ready")}    ${col("first")}   ${col("post")}         ${col("warm")}`);
}
