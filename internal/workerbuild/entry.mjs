// The entry of a Go program built as a Cloudflare Worker by duilie worker build. It starts the
// program (app.wasm, run by the Go distribution's wasm_exec.js) when the first event comes,
// and hands it every queue and fetch event. Every check and message is the program's, in Go
// (package workers); this file only carries events across. Build it again rather than edit it.
import "./wasm_exec.js";
import wasm from "./app.wasm";

// The host's settings from duilie.toml: permissions, bindings, the time limit, [worker].
const config = /*CONFIG*/{};

let go; // the running program's Go instance
let program; // its handlers: {config, jsonText, queue, fetch}

// The program's stdout goes to console.log and its stderr to console.error, one call per line,
// as a Worker developer expects (wasm_exec.js writes both to console.log). A line still open
// when an event ends is written then.
const streams = {
  1: { method: "log", decoder: new TextDecoder(), text: "" },
  2: { method: "error", decoder: new TextDecoder(), text: "" },
};
const writeSync = globalThis.fs.writeSync;
globalThis.fs.writeSync = function (fd, buf) {
  const s = streams[fd];
  if (!s) return writeSync.call(this, fd, buf);
  s.text += s.decoder.decode(buf, { stream: true });
  const lines = s.text.split("\n");
  s.text = lines.pop();
  for (const line of lines) console[s.method](line);
  return buf.length;
};

function flush() {
  for (const s of Object.values(streams)) {
    if (s.text !== "") console[s.method](s.text);
    s.text = "";
  }
}

// The program starts in the first event, not in the Worker's global scope: the Go runtime's
// scheduler waits on timers as it starts, and timers never fire in the global scope.
//
// start runs the program, with the Worker's string bindings as its environment, and returns
// its handlers. A program that has exited (os.Exit, or a panic no handler recovered) is
// started again by the next event.
function start(env) {
  if (program && !go.exited) return program;
  program = undefined;
  go = new Go();
  go.argv = ["worker"];
  go.env = {};
  for (const [k, v] of Object.entries(env ?? {})) if (typeof v === "string") go.env[k] = v;
  const handlers = { config, jsonText };
  globalThis.__duilie = handlers;
  try {
    // run returns once main blocks in workers.Serve, having added queue and fetch.
    go.run(new WebAssembly.Instance(wasm, go.importObject));
  } finally {
    delete globalThis.__duilie;
  }
  if (typeof handlers.queue !== "function") {
    throw new Error("duilie: app.wasm did not start as a Worker: its main must call app.Main");
  }
  return (program = handlers);
}

// jsonText is a queue message's body as JSON text when it is a JSON value, what JSON.parse can
// return: null, a boolean, a finite number, a string, or plain arrays and objects of them.
// Anything else (a foreign producer's bytes, or a structured clone holding a Date, a Map,
// undefined, NaN, a sparse array, a cycle) is undefined, and the program reads it as a body
// that is not a JSON value.
function jsonText(message) {
  try {
    return isJSONValue(message.body) ? JSON.stringify(message.body) : undefined;
  } catch {
    return undefined; // a getter or a proxy that throws, a cycle, nesting deeper than the stack
  }
}

function isJSONValue(body) {
  const stack = [body];
  const seen = new Set();
  while (stack.length > 0) {
    const v = stack.pop();
    switch (typeof v) {
      case "string":
      case "boolean":
        continue;
      case "number":
        if (Number.isFinite(v)) continue;
        return false;
      case "object": {
        if (v === null || seen.has(v)) continue; // a cycle fails in JSON.stringify
        seen.add(v);
        const proto = Object.getPrototypeOf(v);
        if (Array.isArray(v)) {
          if (proto !== Array.prototype || Object.keys(v).length !== v.length) return false;
        } else if (proto !== Object.prototype && proto !== null) {
          return false;
        }
        for (const k of Object.keys(v)) stack.push(v[k]);
        continue;
      }
      default:
        return false; // undefined, a bigint, a symbol, a function
    }
  }
  return true;
}

// Each handler returns the program's promise: it rejects when the event failed, with the
// failure's message (an abort's own text).
export default {
  async fetch(request, env, ctx) {
    try {
      return await start(env).fetch(request, env, ctx);
    } finally {
      flush();
    }
  },
  async queue(batch, env, ctx) {
    try {
      return await start(env).queue(batch, env, ctx);
    } finally {
      flush();
    }
  },
};
