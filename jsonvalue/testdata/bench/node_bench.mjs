// node_bench.mjs measures V8's bytes-to-bytes JSON normalization,
// Buffer.from(JSON.stringify(JSON.parse(buf.toString()))), on the benchmark
// payloads and prints {"file": MB/s, ...} as JSON (MB = 10^6 bytes of input).
//
//	node jsonvalue/testdata/bench/node_bench.mjs jsonvalue/testdata/bench [FILE...]
//
// With no FILE it measures all four payloads.
// TestCompareNode in bench_test.go runs it beside the Go benchmarks.

import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2] ?? path.dirname(new URL(import.meta.url).pathname);
const files = process.argv.length > 3 ? process.argv.slice(3) : ['a_task.json', 'b_mixed.json', 'c_strings.json', 'd_numbers.json'];
const result = {};
let sink = 0;
for (const f of files) {
  const buf = fs.readFileSync(path.join(dir, f));
  const run = (n) => {
    for (let i = 0; i < n; i++) sink += Buffer.from(JSON.stringify(JSON.parse(buf.toString()))).length;
  };
  // Warm up the JIT, then size the runs to about a second.
  let n = 1;
  let t0 = process.hrtime.bigint();
  for (;;) {
    run(n);
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (dt > 0.3) break;
    n *= 2;
    t0 = process.hrtime.bigint();
  }
  let best = 0;
  for (let k = 0; k < 3; k++) {
    t0 = process.hrtime.bigint();
    run(n);
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.max(best, (buf.length * n) / dt / 1e6);
  }
  result[f] = Math.round(best * 10) / 10;
}
if (sink < 0) console.error(sink);
console.log(JSON.stringify(result));
