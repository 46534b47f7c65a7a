// The entry of a Go program built as a Cloudflare Worker by duilie worker build. It starts the
// program (app.wasm, run by the Go distribution's wasm_exec.js) when the first event comes,
// and hands it every queue and fetch event. Every check and message is the program's, in Go
// (package workers); this file only carries events across. Build it again rather than edit it.
import "./wasm_exec.js";
import wasm from "./app.wasm";

// The host's settings from duilie.toml: permissions, bindings, the time limit.
const config = /*CONFIG*/{};

let go; // the running program's Go instance
let program; // its handlers: {config, jsonText, queue, fetch}

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
  for (const [k, v] of Object.entries(env)) if (typeof v === "string") go.env[k] = v;
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
  let body;
  try {
    body = message.body;
  } catch {
    return undefined;
  }
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
        return undefined;
      case "object": {
        if (v === null || seen.has(v)) continue; // a cycle fails in JSON.stringify below
        seen.add(v);
        const proto = Object.getPrototypeOf(v);
        if (Array.isArray(v)) {
          if (proto !== Array.prototype || Object.keys(v).length !== v.length) return undefined;
        } else if (proto !== Object.prototype && proto !== null) {
          return undefined;
        }
        for (const k of Object.keys(v)) stack.push(v[k]);
        continue;
      }
      default:
        return undefined; // undefined, a bigint, a symbol, a function
    }
  }
  try {
    return JSON.stringify(body);
  } catch {
    return undefined; // a cycle, or nesting deeper than the engine's stack
  }
}

export default {
  fetch(request, env, ctx) {
    return start(env).fetch(request, env, ctx);
  },
  queue(batch, env, ctx) {
    return start(env).queue(batch, env, ctx);
  },
};
