// What harness.mjs and coldstart.mjs share: Miniflare from the cache directory install.sh
// fills, and a built Worker's wrangler.jsonc as Miniflare options.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { homedir } from "node:os";

const packages =
  process.env.DUILIE_MINIFLARE_DIR ||
  join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "duilie", "miniflare");
export const { Miniflare } = createRequire(join(packages, "/"))("miniflare");

// readWrangler reads the wrangler.jsonc duilie worker build wrote: JSON after its comment lines.
export function readWrangler(dir) {
  const text = readFileSync(join(dir, "wrangler.jsonc"), "utf8");
  return JSON.parse(text.replace(/^\s*\/\/.*$/gm, ""));
}

// workerOptions maps the wrangler.jsonc of the Worker built in w.dir onto Miniflare's options
// for it (harness.mjs describes w). The binding w.record becomes a service binding to the
// recorder's RecordingQueue; recorded is the queue it stands for.
export function workerOptions(w) {
  const dir = resolve(w.dir);
  const wr = readWrangler(dir);
  const options = {
    name: w.name || wr.name,
    modules: true,
    modulesRoot: dir,
    scriptPath: join(dir, wr.main),
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }],
    compatibilityDate: wr.compatibility_date,
    bindings: { ...(wr.vars || {}), ...(w.vars || {}) },
    queueProducers: {},
    queueConsumers: {},
    serviceBindings: {},
  };
  let recorded;
  for (const p of wr.queues?.producers || []) {
    if ((w.drop || []).includes(p.binding)) continue;
    if (w.record === p.binding) {
      options.serviceBindings[p.binding] = { name: "recorder", entrypoint: "RecordingQueue" };
      recorded = p.queue;
    } else {
      options.queueProducers[p.binding] = { queueName: p.queue };
    }
  }
  if (w.consume !== false) {
    for (const c of wr.queues?.consumers || []) {
      // Miniflare has no max_concurrency: it runs one batch of a queue at a time.
      options.queueConsumers[c.queue] = {
        maxBatchSize: c.max_batch_size,
        maxBatchTimeout: c.max_batch_timeout,
        maxRetries: c.max_retries,
        retryDelay: c.retry_delay,
        deadLetterQueue: c.dead_letter_queue,
      };
    }
  }
  return { options, recorded };
}
