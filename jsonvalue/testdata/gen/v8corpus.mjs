// v8corpus.mjs writes the golden corpus of package jsonvalue: inputs and what
// V8 itself makes of them.
//
// Regenerate (from the repository root; node 20 or later, standard library only):
//
//	node jsonvalue/testdata/gen/v8corpus.mjs jsonvalue/testdata/corpus
//
// The output is deterministic (a seeded PRNG, no clock), so a run on an
// unchanged script reproduces the checked-in files; TestCorpusLive in
// corpus_test.go checks exactly that whenever node is on PATH.
//
// Files written to the output directory (gzip-compressed JSON lines):
//
//	cases.jsonl.gz   {"name","in"|"in64","out","depth","marker"}: the input bytes as
//	                 a string when they are valid UTF-8 (in), else base64 (in64); out
//	                 is the text of JSON.stringify(JSON.parse(text)) (its UTF-8 bytes
//	                 are what Append must produce), or null when the input is not a
//	                 JSON text: JSON.parse
//	                 throws, or the bytes are not valid UTF-8 (SPEC §5.1; V8 would
//	                 decode them with replacement characters, we refuse them). depth
//	                 and marker are computed here on the parsed value (SPEC §5.3-5.5).
//	strings.jsonl.gz {"name","in64","out"}: in64 is arbitrary bytes (base64), out is
//	                 JSON.stringify(buf.toString("utf8")): the reference for
//	                 AppendString, including the replacement of invalid UTF-8.
//
// Values nested deeper than V8's default stack allows JSON.stringify to go are
// run in a worker thread with a larger stack.

import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const MARKERS = ['$句柄', '$未定义', '$大整数', '$数字'];

// expect returns what V8 makes of the input bytes.
function expect(buf) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf);
  } catch {
    return { out: null };
  }
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return { out: null };
  }
  const s = JSON.stringify(v);
  return { out: s, depth: depthOf(v), marker: markerOf(v) };
}

// depthOf: each array or object is one level; a scalar is 0. Iterative.
function depthOf(v) {
  let max = 0;
  const stack = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop();
    if (x === null || typeof x !== 'object') {
      max = Math.max(max, d);
      continue;
    }
    max = Math.max(max, d + 1);
    for (const k of Object.keys(x)) stack.push([x[k], d + 1]);
  }
  return max;
}

// markerOf: an object with a host-marker key at any position, or a number
// that overflowed to ±Infinity.
function markerOf(v) {
  const stack = [v];
  while (stack.length) {
    const x = stack.pop();
    if (typeof x === 'number' && !Number.isFinite(x)) return true;
    if (x === null || typeof x !== 'object') continue;
    const keys = Object.keys(x);
    if (!Array.isArray(x) && keys.some((k) => MARKERS.includes(k))) return true;
    for (const k of keys) stack.push(x[k]);
  }
  return false;
}

if (!isMainThread) {
  parentPort.postMessage(workerData.map((b64) => expect(Buffer.from(b64, 'base64'))));
} else {
  main();
}

// ---------------------------------------------------------------------------

function main() {
  const outDir = process.argv[2];
  if (!outDir) {
    console.error('usage: node v8corpus.mjs OUTPUT_DIR');
    process.exit(2);
  }
  const cases = []; // {name, buf, deep}
  const add = (name, input, deep = false) =>
    cases.push({ name, buf: typeof input === 'string' ? Buffer.from(input, 'utf8') : Buffer.from(input), deep });

  catalogue(add);
  random(add);

  // Deep values go to a worker with a big stack, in parallel with the rest.
  const deep = cases.filter((c) => c.deep);
  const worker = new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), {
      workerData: deep.map((c) => c.buf.toString('base64')),
      resourceLimits: { stackSizeMb: 256 },
    });
    w.once('message', resolve);
    w.once('error', reject);
  });
  const lines = new Array(cases.length);
  cases.forEach((c, i) => {
    if (!c.deep) lines[i] = line(c, expect(c.buf));
  });
  worker.then((results) => {
    let j = 0;
    cases.forEach((c, i) => {
      if (c.deep) lines[i] = line(c, results[j++]);
    });
    fs.mkdirSync(outDir, { recursive: true });
    write(path.join(outDir, 'cases.jsonl.gz'), lines);
    write(path.join(outDir, 'strings.jsonl.gz'), stringCases());
    console.log(`wrote ${cases.length} cases to ${outDir}`);
  });
}

// line encodes one case. Bytes that are valid UTF-8 are stored as a JSON
// string ("in"), which compresses far better than base64; others as base64
// ("in64"). out is always valid UTF-8.
function line(c, e) {
  const o = { name: c.name };
  let text = null;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(c.buf);
  } catch {}
  if (text !== null) o.in = text;
  else o.in64 = c.buf.toString('base64');
  o.out = e.out;
  if (e.out !== null) {
    o.depth = e.depth;
    o.marker = e.marker;
  }
  return JSON.stringify(o);
}

function write(file, lines) {
  fs.writeFileSync(file, zlib.gzipSync(Buffer.from(lines.join('\n') + '\n'), { level: 9 }));
}

// ---------------------------------------------------------------------------
// The catalogue of edge cases.

function catalogue(add) {
  const each = (group, list) => list.forEach((s, i) => add(`${group}/${i}`, s));

  each('literal', [
    'null', 'true', 'false', ' null ', 'nul', 'nulll', 'True', 'NULL', 'undefined', 'tru', 'fals',
    '', ' ', '\t\n\r ', '[', ']', '{', '}', ',', ':', '[,]', '[1,]', '[,1]', '[1,,2]', '{,}',
    '{"a":1,}', '{"a"}', '{"a":}', '{:1}', '{1:1}', "{'a':1}", "'a'", '{a:1}', '[1 2]', '{"a":1 "b":2}',
    '[1]]', '[[1]', '{"a":1}}', '1 2', '"a" "b"', '[]', '{}', '[[]]', '[{}]', '{"":{}}', '[] ',
    '[1,[2,[3,[4]]]]', '{"a":[{"b":[]}]}', '/*c*/1', '1//c', '[1]x', '[1],', 'nullx', 'truefalse',
  ]);

  each('number', [
    '0', '-0', '0.0', '-0.0', '0e0', '-0e-0', '0E+0', '1', '-1', '1E2', '1e2', '1e+2', '1e-2', '1.5e3',
    '123456789012345678901234567890', '1e21', '1e20', '999999999999999999999', '100000000000000000000',
    '99999999999999999999', '123456789012345678', '1e-6', '1e-7', '0.000001', '0.0000001', '0.00000123',
    '0.0000012345', '0.000000123', '1.7976931348623157e308', '1.7976931348623158e308',
    '1.7976931348623159e308', '-1.7976931348623159e308', '5e-324', '4e-324', '3e-324', '2.5e-324',
    '2.4703282292062328e-324', '2.4703282292062327e-324', '4.9406564584124654e-324',
    '2.2250738585072014e-308', '2.2250738585072011e-308', '2.225073858507201e-308', '1e-310',
    '9007199254740993', '9007199254740992', '-9007199254740993', '9007199254740991', '0.1', '0.2',
    '0.30000000000000004', '0.3', '123456789012345.6', '1234567890123456789', '12345678901234567890',
    '0.1234567890123456789', '1e400', '-1e400', '1e-400', '-1e-400', '1e999', '-1e999', '1E+308', '1e308',
    '1e309', '1.0', '1.00', '10.0', '100', '1e0', '1e-0', '1e+0', '1e00', '1e-00021', '0.12345678901234567',
    '1.2345678901234567e-7', '123e-20', '1.5e300', '0.000001234', '0.0000001234', '999999999999999',
    '9999999999999999', '-999999999999999', '123456789012345', '1234567890123456', '100000000000000',
    '1000000000000000', '10000000000000000', '0.5', '-0.5', '2.5', '1.25', '100.125', '0.100', '1.10',
    '12.34e1', '0.0001e4', '1e-5', '1.5e-6', '1.5e-7', '123456789e-15', '1e1', '1e15', '1e16', '1e17',
    '4.35', '0.035', '5e-7', '1.0000000000000002', '1.00000000000000011', '0.99999999999999989',
    '18014398509481985', '295147905179352825856', '1.e5', '01', '-01', '+1', '.5', '1.', '-', '--1',
    '1e', '1e+', '1e-', '1.e', '1.e5', '0x10', 'NaN', '-NaN', 'Infinity', '-Infinity', '1_000', '١',
    '1.5.5', '1e5e5', '00', '-.5', '0.', '2.', '1E', '-00', '0-', '1-', '1+1', '- 1', '1 .5', '1. 5',
    '1e 5', '1.5E+', '0e', '01.5', '[-]', '[.5]', '[1.]', '[01]', '[1e]', '-0.000', '-0e5',
    '1' + '0'.repeat(400), '0.' + '0'.repeat(400) + '1', '1' + '0'.repeat(308), '1' + '0'.repeat(309),
    '[1e21,1e-7,-0,100,0.000001]', '123.456e-789', '-123.456e+789', '0.' + '9'.repeat(30),
    '9'.repeat(30) + '.5', '1234.5678e2', '0.0e-0',
  ]);

  const s = String.raw;
  each('string', [
    s`""`, s`"a"`, s`"\""`, s`"\\"`, s`"\/"`, s`"\b"`, s`"\f"`, s`"\n"`, s`"\r"`, s`"\t"`,
    s`"\"\\\/\b\f\n\r\t"`, s`"\u0041"`, s`"\u00e9"`, s`"\u00E9"`, s`"\u4E2D"`, s`"\u4e2d"`,
    s`"\u007f"`, s`"\u007F"`, '"\x7f"', s`"\u2028\u2029"`, '"\u2028\u2029"', s`"\u0022"`, s`"\u005c"`,
    s`"\u005C"`, s`"\u002f"`, s`"\u0000"`, s`"\u001F"`, s`"\u0020"`, s`"\ud800"`, s`"\udc00"`,
    s`"\udbff\udfff"`, s`"\udc00\ud800"`, s`"\ud800\ud800\udc00"`, s`"\ud800x"`, s`"\ud800\u0041"`,
    s`"\ud800\\"`, s`"\uDBFF"`, s`"\ud83d\ude00"`, s`"\uD83D\uDE00"`, s`"\ud83d\uDe00"`, '"😀"', '"中文"',
    '"日本語のテキスト"', s`"\ud83d"`, s`"\ude00"`, s`"\ude00\ud83d"`, s`"a\ud800b\udc00c"`,
    s`"\ud800\n"`, s`"\ud800\udc00\udc00"`, s`"\ud800\ud800"`, s`"\udfff\ud800\udc00"`,
    s`"\ud800\u"`, s`"\ud800\u12"`, s`"\ud800\uzzzz"`, s`"\ud800\udc0"`, s`"\uDFFF"`, s`"\uFFFF"`,
    s`"\uFFFE"`, s`"\uFEFF"`, s`"\ue000"`, s`"\ud7ff"`, s`"\x"`, s`"\u12"`, s`"\u12g4"`, s`"\U0041"`,
    s`"\'"`, s`"\a"`, s`"\0"`, s`"\v"`, s`"\ "`, s`"\u 123"`, s`"\u+123"`, s`"\u-123"`, '"abc', s`"abc\"`,
    s`"\"`, '"', s`"\u"`, s`"\u004"`, s`"\u004`, "'a'", '"a\u0000b"', '"\u00ff"', '"</script>"',
    '"<>&\'"', '"é"', '"e\u0301"', '"𝄞"', '"\u{10FFFF}"', '"\u{FFFD}"', '"\u00a0"', '"\u3000"',
    '"\ufeff"', '"a/b"', s`"a\/b"`, s`"\u0008\u0009\u000a\u000b\u000c\u000d"`, '"' + 'x'.repeat(1000) + '"',
    '"' + 'x\\"'.repeat(300) + '"', '["\\"", "\\\\", "],[", "{\\"body\\":1}"]',
  ]);
  for (let c = 0; c < 0x20; c++) {
    const h = c.toString(16).padStart(4, '0');
    add(`string/control-escaped-${h}`, `"\\u${h}"`);
    add(`string/control-escaped-upper-${h}`, `"\\u${h.toUpperCase()}"`);
    add(`string/control-raw-${h}`, Buffer.from([0x22, 0x61, c, 0x62, 0x22]));
  }
  for (const c of ['"', '\\', '/', 'b', 'f', 'n', 'r', 't', 'u0041']) add(`string/escape-key-${c}`, `{"\\${c}":"\\${c}"}`);
  for (let c = 0x20; c < 0x80; c++) add(`string/escape-any-${c}`, Buffer.from(`"\\${String.fromCharCode(c)}"`, 'latin1'));

  each('whitespace', [
    ' 1', '1 ', '\t1\t', '\n1\n', '\r1\r', ' \t\n\r[ \t\n\r1 \t\n\r, \t\n\r{ \t\n\r"a" \t\n\r: \t\n\r2 \t\n\r} \t\n\r] \t\n\r',
    '\v1', '1\v', '\f1', '1\f', '[1,\f2]', '\u00a01', '1\u00a0', '[1,\u00a02]', '\ufeff1', '\ufeff{}',
    '1\ufeff', '[\ufeff1]', '\u20281', '[1\u2028]', '\u30001', '\u00851', '\u0000', '1\u0000', '\x001',
    '[1,\u000b2]', '{"a"\f:1}', ' ', '\ufeff', '\u00a0',
  ]);
  add('whitespace/bom-bytes', Buffer.from([0xef, 0xbb, 0xbf, 0x31]));
  add('whitespace/bom-in-string', Buffer.from([0x22, 0xef, 0xbb, 0xbf, 0x22]));

  const utf8 = {
    'ff': [0xff], 'fe': [0xfe], 'c0-80': [0xc0, 0x80], 'c1-bf': [0xc1, 0xbf], 'e0-80-80': [0xe0, 0x80, 0x80],
    'e0-9f-bf': [0xe0, 0x9f, 0xbf], 'f0-80-80-80': [0xf0, 0x80, 0x80, 0x80], 'f0-8f-bf-bf': [0xf0, 0x8f, 0xbf, 0xbf],
    'ed-a0-80': [0xed, 0xa0, 0x80], 'ed-bf-bf': [0xed, 0xbf, 0xbf], 'ed-a0-bd-ed-b8-80': [0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80],
    'ed-9f-bf': [0xed, 0x9f, 0xbf], 'f4-90-80-80': [0xf4, 0x90, 0x80, 0x80], 'f4-8f-bf-bf': [0xf4, 0x8f, 0xbf, 0xbf],
    'f5-80-80-80': [0xf5, 0x80, 0x80, 0x80], 'f8-88-80-80-80': [0xf8, 0x88, 0x80, 0x80, 0x80],
    'e4-b8': [0xe4, 0xb8], 'c3': [0xc3], '80': [0x80], 'bf': [0xbf], 'f0-9f-98': [0xf0, 0x9f, 0x98],
    'f0-9f': [0xf0, 0x9f], 'c3-41': [0xc3, 0x41], 'e4-41-80': [0xe4, 0x41, 0x80], 'c3-a9': [0xc3, 0xa9],
    'e4-b8-ad': [0xe4, 0xb8, 0xad], 'f0-9f-98-80': [0xf0, 0x9f, 0x98, 0x80], 'ef-bf-bd': [0xef, 0xbf, 0xbd],
    'ef-bf-bf': [0xef, 0xbf, 0xbf], 'c2-80': [0xc2, 0x80], 'df-bf': [0xdf, 0xbf], 'e0-a0-80': [0xe0, 0xa0, 0x80],
    'f0-90-80-80': [0xf0, 0x90, 0x80, 0x80],
  };
  for (const [name, bytes] of Object.entries(utf8)) {
    const q = 0x22;
    add(`utf8/string-${name}`, [q, ...bytes, q]);
    add(`utf8/string-mid-${name}`, [q, 0x61, ...bytes, 0x62, q]);
    add(`utf8/string-long-${name}`, [q, ...Buffer.from('abcdefghijklmnop'), ...bytes, ...Buffer.from('abcdefghijklmnop'), q]);
    add(`utf8/key-${name}`, [0x7b, q, ...bytes, q, 0x3a, 0x31, 0x7d]);
    add(`utf8/outside-${name}`, [0x5b, 0x31, 0x2c, ...bytes, 0x5d]);
    add(`utf8/after-${name}`, [0x31, ...bytes]);
    add(`utf8/end-of-string-${name}`, [q, ...bytes]);
  }

  const nestA = (d, inner = '1') => '['.repeat(d) + inner + ']'.repeat(d);
  const nestO = (d, inner = '1') => '{"a":'.repeat(d) + inner + '}'.repeat(d);
  const nestM = (d) => {
    let open = '', close = '';
    for (let i = 0; i < d; i++) {
      if (i % 2) { open += '{"k":'; close = '}' + close; } else { open += '['; close = ']' + close; }
    }
    return open + '0' + close;
  };
  for (const d of [1, 2, 23, 24, 25, 26, 27, 31, 32, 33, 34, 100, 1000]) {
    add(`depth/array-${d}`, nestA(d));
    add(`depth/object-${d}`, nestO(d));
    add(`depth/mixed-${d}`, nestM(d));
    add(`depth/empty-${d}`, nestA(d - 1, '[]'));
    add(`depth/empty-object-${d}`, nestA(d - 1, '{}'));
    add(`depth/unclosed-${d}`, '['.repeat(d));
  }
  add('depth/array-10000', nestA(10000), true);
  add('depth/object-10000', nestO(10000), true);
  add('depth/mixed-10000', nestM(10000), true);
  add('depth/array-100000', nestA(100000), true);
  add('depth/unclosed-100000', '['.repeat(100000) + ']'.repeat(99999));
  add('depth/brackets-in-strings', '["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"]');
  add('depth/wide', '[' + Array.from({ length: 30 }, (_, i) => nestA(i)).join(',') + ']');
  add('depth/deep-overwritten', `{"a":${nestA(40)},"a":1}`);
  add('depth/deep-overwritten-later', `{"a":1,"a":${nestA(40)}}`);
  add('depth/deep-overwritten-nested', `[{"x":{"a":${nestO(40)},"a":[[1]]}}]`);
  add('depth/deep-sibling', `{"a":${nestA(40)},"b":1}`);

  const markerKeys = [...MARKERS];
  markerKeys.forEach((m, i) => {
    add(`marker/raw-${i}`, `{"${m}":"1"}`);
    add(`marker/raw-null-${i}`, `{"${m}":null}`);
    add(`marker/not-first-${i}`, `{"a":1,"${m}":2}`);
    add(`marker/nested-${i}`, `[[{"x":{"${m}":1}}]]`);
    add(`marker/in-array-${i}`, `[1,{"${m}":1},2]`);
    add(`marker/escaped-dollar-${i}`, `{"\\u0024${m.slice(1)}":1}`);
    const all = [...m].map((ch) => '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0')).join('');
    add(`marker/escaped-all-${i}`, `{"${all}":1}`);
    add(`marker/escaped-all-upper-${i}`, `{"${all.toUpperCase().replaceAll('\\U', '\\u')}":1}`);
    add(`marker/string-value-${i}`, `{"a":"${m}"}`);
    add(`marker/string-top-${i}`, `"${m}"`);
    add(`marker/array-${i}`, `["${m}"]`);
    add(`marker/key-suffix-${i}`, `{"${m} ":1}`);
    add(`marker/key-prefix-${i}`, `{" ${m}":1}`);
    add(`marker/key-no-dollar-${i}`, `{"${m.slice(1)}":1}`);
    add(`marker/key-fullwidth-dollar-${i}`, `{"＄${m.slice(1)}":1}`);
    add(`marker/overwritten-${i}`, `{"a":{"${m}":1},"a":1}`);
    add(`marker/overwriting-${i}`, `{"a":1,"a":{"${m}":1}}`);
    add(`marker/dup-marker-${i}`, `{"${m}":1,"${m}":2}`);
    add(`marker/with-index-${i}`, `{"${m}":1,"0":2}`);
    add(`marker/in-string-key-${i}`, `{"{\\"${m}\\":1}":1}`);
  });
  each('marker/other', [
    '{"$":1}', '{"$x":1}', '{"$ 句柄":1}', '{"$句":1}', '{"$句柄柄":1}', '{"$$句柄":1}', '{"$数":1}', '{"$大整":1}',
    '{"$未定":1}', '{"$undefined":1}', '{"$handle":1}', '[1e999]', '1e999', '-1e999', '-1e400', '{"a":1e999}',
    '{"a":1e999,"a":1}', '{"a":1,"a":1e999}', '{"a":[1e999],"a":[1]}', '[1e308,1e309]', '[-1e308,-1e309]',
    '[1.7976931348623157e308,1.7976931348623159e308]', '{"0":1e999,"0":1}', '{"1":1,"0":1e999}',
    '{"a":{"b":{"$句柄":1},"b":2},"c":1e999,"c":3}',
  ]);

  each('keys', [
    '{"b":1,"a":2}', '{"1":1,"0":2}', '{"b":1,"1":2,"a":3,"0":4,"b":5,"4294967295":6,"4294967294":7}',
    '{"01":1,"1":2}', '{"-1":1,"0":2}', '{"4294967294":1,"4294967295":2,"4294967296":3,"0":4}',
    '{"a":1,"a":2}', '{"a":1,"b":2,"a":3}', '{"0":1,"0":2}', '{"1":1,"0":2,"1":3}', '{"__proto__":1}',
    '{"__proto__":{"a":1}}', '{"__proto__":1,"__proto__":2}', '{"a":1,"__proto__":{"x":1},"0":2}',
    '{"constructor":1,"toString":2,"hasOwnProperty":3}', '{"":1}', '{"":1,"":2}', '{"1.0":1,"1":2}',
    '{"1e0":1,"0":2}', '{" 1":1,"1 ":2,"1":3}', '{"+1":1,"1":2}', '{"0x1":1,"1":2}', '{"00":1,"0":2}',
    '{"\\u0031":1,"0":2}', '{"\\u0030":1,"\\u0030":2}', '{"a":1,"\\u0061":2}', '{"é":1,"\\u00e9":2}',
    '{"\\ud800":1,"\\ud800":2,"\\udc00":3}', '{"\\ud83d\\ude00":1,"😀":2}', '{"9":1,"10":2,"2":3,"100":4}',
    '{"10":1,"9":2}', '{"4294967294":1,"0":2}', '{"4294967295":1,"0":2}', '{"2147483648":1,"2147483647":2}',
    '{"9007199254740991":1,"0":2}', '{"18446744073709551615":1,"1":2}', '{"99999999999":1,"1":2}',
    '{"0":1,"1":2,"2":3}', '{"0":1,"a":2,"1":3}', '{"a":1,"0":2}', '{"b":{"1":1,"0":1},"a":[{"y":1,"x":2,"y":3}]}',
    '[{"a":1,"a":2},{"a":3}]', '{"a":{"a":{"a":1,"a":2},"a":3},"a":4}', '{"length":1,"0":2}',
    '{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"t":20,"u":21,"v":22,"w":23,"x":24,"y":25,"z":26,"a":0}',
  ]);
  // Big objects: many keys, duplicates far apart, many index keys.
  const many = (n, f) => '{' + Array.from({ length: n }, (_, i) => f(i)).join(',') + '}';
  add('keys/many-distinct', many(2000, (i) => `"k${i}":${i}`));
  add('keys/many-dup-end', many(2000, (i) => `"k${i % 1500}":${i}`));
  add('keys/many-dup-first-last', many(1000, (i) => `"k${i === 999 ? 0 : i}":${i}`));
  add('keys/many-index-desc', many(1000, (i) => `"${999 - i}":${i}`));
  add('keys/many-index-asc', many(1000, (i) => `"${i}":${i}`));
  add('keys/many-mixed', many(1000, (i) => (i % 3 ? `"n${i}"` : `"${(i * 7919) % 1000}"`) + `:${i}`));
  add('keys/many-24', many(24, (i) => `"k${i}":${i}`).slice(0, -1) + ',"k0":"x"}');
  add('keys/many-25', many(25, (i) => `"k${i}":${i}`).slice(0, -1) + ',"k24":"x"}');
  add('keys/many-26', many(26, (i) => `"k${i}":${i}`).slice(0, -1) + ',"k0":"x"}');

  // Sizes around the 128000-byte limits.
  const e21 = '[' + Array(25599).fill('1e21').join(',') + ']';
  add('size/grows-past-128000', e21); // 127997 bytes in, 153596 out
  const pad = (n) => '"' + 'a'.repeat(n - 2) + '"';
  add('size/exactly-128000', pad(128000));
  add('size/128001', pad(128001));
  add('size/shrinks', '[' + Array(20000).fill(' 1.0 ').join(',') + ']');
  add('size/1MiB-string', pad(1048576));
  const nums = [];
  for (let i = 0, len = 2; len < 1048000; i++) {
    const j = i % 1500; // repeats, so that the corpus compresses
    const t = j % 3 ? String((j * 7919) % 1000003) : `${j % 1000}.${(j * 31) % 997}e${(j % 40) - 20}`;
    nums.push(t);
    len += t.length + 1;
  }
  add('size/1MiB-numbers', '[' + nums.join(',') + ']');
  add('size/escapes', '"' + '\\u00e9\\n\\ud83d\\ude00\\"'.repeat(5000) + '"');
  add('size/cjk', '"' + '中文字符串测试'.repeat(5000) + '"');
}

// ---------------------------------------------------------------------------
// Seeded random values and mutations.

function mulberry32(a) {
  return function () {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function random(add) {
  const rnd = mulberry32(20240611);
  const int = (n) => Math.floor(rnd() * n);
  const pick = (a) => a[int(a.length)];
  const chance = (p) => rnd() < p;
  const hex = (u) => {
    const h = u.toString(16).padStart(4, '0');
    return '\\u' + (chance(0.3) ? h.toUpperCase() : h);
  };
  const ws = () => (chance(0.8) ? '' : Array.from({ length: 1 + int(3) }, () => pick([' ', '\t', '\n', '\r'])).join(''));
  const digits = (n, first = '0123456789') => {
    let s = first[int(first.length)];
    for (let i = 1; i < n; i++) s += int(10);
    return s;
  };
  const f64 = new Float64Array(1);
  const u32 = new Uint32Array(f64.buffer);

  function number() {
    switch (int(8)) {
      case 0: return String(int(1000) - 500);
      case 1: return (chance(0.3) ? '-' : '') + digits(1 + int(25), '123456789');
      case 2: {
        let s = (chance(0.3) ? '-' : '') + (chance(0.4) ? '0' : digits(1 + int(8), '123456789'));
        if (chance(0.7)) s += '.' + digits(1 + int(20));
        if (chance(0.6)) s += pick(['e', 'E']) + pick(['', '+', '-']) + digits(1 + int(3));
        return s;
      }
      case 3: {
        do {
          u32[0] = int(2 ** 32);
          u32[1] = int(2 ** 32);
        } while (!Number.isFinite(f64[0]));
        return String(f64[0]);
      }
      case 4: {
        const x = (rnd() - 0.5) * 10 ** (int(60) - 30);
        return pick([String(x), x.toExponential(int(20)), x.toPrecision(1 + int(21)), Math.abs(x) < 1e21 ? x.toFixed(int(20)) : String(x)]);
      }
      case 5: return pick(['0', '-0', '1e21', '1e-7', '1e999', '-1e999', '1e-400', '5e-324', '0.000001', '9007199254740993', '1.7976931348623157e308']);
      case 6: return String(int(2 ** 32) * (chance(0.5) ? 1 : 1e-6));
      default: return (chance(0.5) ? '-' : '') + digits(1 + int(3), '123456789') + '.' + digits(1 + int(12));
    }
  }

  const rawChars = ['中', '文', 'é', 'ß', '😀', '𝄞', '\u2028', '\u2029', '\x7f', '\u00a0', '\ufeff', '/', '<', '>', '&', "'", 'Ω', '\u0301', '\ufffd', '\u{10ffff}'];
  function stringBody() {
    let s = '';
    const parts = int(6);
    for (let p = 0; p < parts; p++) {
      switch (int(6)) {
        case 0: {
          const n = 1 + int(20);
          for (let i = 0; i < n; i++) {
            let c = 0x20 + int(0x5f);
            if (c === 0x22 || c === 0x5c) c = 0x41;
            s += String.fromCharCode(c);
          }
          break;
        }
        case 1: s += pick(['\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t']); break;
        case 2: s += hex(pick([int(0x20), 0x20 + int(0x60), 0x7f, 0x80 + int(0x780), 0x4e00 + int(0x5000), 0x2028, 0x2029, 0xfffe, 0xffff, 0xfeff, 0x22, 0x5c, 0x2f, 0x24])); break;
        case 3: {
          // surrogates, paired or not, in any order
          const hi = 0xd800 + int(0x400), lo = 0xdc00 + int(0x400);
          s += pick([hex(hi) + hex(lo), hex(hi), hex(lo), hex(lo) + hex(hi), hex(hi) + hex(hi) + hex(lo), hex(hi) + 'x', String.fromCodePoint(0x10000 + int(0x100000))]);
          break;
        }
        case 4: s += pick(rawChars); break;
        default: s += pick(['$', '$句柄', '句柄', '[', ']', '{', '}', ',', ':', '"'.replace('"', '\\"')]);
      }
    }
    return s;
  }
  const keyPool = ['a', 'b', 'c', '__proto__', '0', '1', '2', '10', '01', '-1', '4294967294', '4294967295', '4294967296', '', 'length', '$x', '$', 'é', '\\u0061', '\\u0031', '$句柄', '\\u0024数字', '$未定义', '$大整数', 'x y', '😀', '\\ud800'];
  function key() {
    if (chance(0.7)) return keyPool[int(chance(0.9) ? 12 : keyPool.length)];
    if (chance(0.3)) return String(int(100));
    return stringBody();
  }

  function value(d) {
    const r = rnd();
    if (d > 3 || r < 0.45) {
      switch (int(5)) {
        case 0: return pick(['null', 'true', 'false']);
        case 1: case 2: return number();
        default: return '"' + stringBody() + '"';
      }
    }
    const n = int(5);
    const items = [];
    if (r < 0.7) {
      for (let i = 0; i < n; i++) items.push(ws() + value(d + 1) + ws());
      return '[' + (items.length ? items.join(',') : ws()) + ']';
    }
    for (let i = 0; i < n; i++) items.push(ws() + '"' + key() + '"' + ws() + ':' + ws() + value(d + 1) + ws());
    return '{' + (items.length ? items.join(',') : ws()) + '}';
  }

  const valid = [];
  for (let i = 0; i < 10000; i++) {
    const t = ws() + value(0) + ws();
    valid.push(t);
    add(`random/${i}`, t);
  }

  const tokens = ['{', '}', '[', ']', ',', ':', '"', '\\', ' ', '0', '1', '-', '.', 'e', 'E', '+', 'null', 'true', '"a"', '1e999', '"$句柄"'];
  const bytesPool = [0x00, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1f, 0x20, 0x22, 0x5c, 0x7f, 0x80, 0xa0, 0xbf, 0xc0, 0xc3, 0xe4, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff];
  for (let i = 0; i < 2000; i++) {
    let b = Buffer.from(pick(valid), 'utf8');
    const steps = 1 + int(3);
    for (let k = 0; k < steps; k++) {
      const at = int(b.length + 1);
      switch (int(6)) {
        case 0: b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]); break; // delete a byte
        case 1: b = Buffer.concat([b.subarray(0, at), Buffer.from([pick(bytesPool)]), b.subarray(at)]); break;
        case 2: if (at < b.length) { b = Buffer.from(b); b[at] = int(256); } break;
        case 3: b = Buffer.concat([b.subarray(0, at), Buffer.from(pick(tokens)), b.subarray(at)]); break;
        case 4: b = b.subarray(0, at); break; // truncate
        default: { // duplicate a span
          const len = int(16);
          b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + len), b.subarray(at)]);
        }
      }
    }
    add(`mutation/${i}`, b);
  }
}

// ---------------------------------------------------------------------------
// AppendString reference: JSON.stringify of the string node decodes.

function stringCases() {
  const rnd = mulberry32(7);
  const lines = [];
  const addS = (name, bytes) => {
    const buf = Buffer.from(bytes);
    const str = buf.toString('utf8');
    if (str !== new TextDecoder('utf-8', { ignoreBOM: true }).decode(buf)) throw new Error(`decoders disagree on ${name}`);
    lines.push(JSON.stringify({ name, in64: buf.toString('base64'), out: JSON.stringify(str) }));
  };
  const fixed = [
    '', 'a', 'hello world', '"', '\\', '/', '\b\f\n\r\t', '\x00\x01\x1f\x7f', '\u2028\u2029', '中文', '😀',
    '</script>', '<>&', 'a"b\\c', '$句柄', '\ufeff', '\ufffd', 'x'.repeat(100), 'é'.repeat(50),
  ];
  fixed.forEach((s, i) => addS(`fixed/${i}`, Buffer.from(s, 'utf8')));
  for (let c = 0; c < 0x80; c++) addS(`ascii/${c}`, [c]);
  const bad = [
    [0xff], [0xfe], [0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xc2], [0xc2, 0x41], [0xe0, 0x80, 0x80],
    [0xe0, 0xa0], [0xe0, 0xa0, 0x41], [0xe4, 0xb8], [0xe4, 0xb8, 0x41], [0xed, 0xa0, 0x80], [0xed, 0x9f, 0xbf],
    [0xf0, 0x80, 0x80, 0x80], [0xf0, 0x90], [0xf0, 0x90, 0x80], [0xf0, 0x9f, 0x98, 0x41], [0xf4, 0x90, 0x80, 0x80],
    [0xf4, 0x8f, 0xbf], [0xf5, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x41, 0xc3], [0xc3, 0xc3, 0xa9],
    [0xe2, 0x82, 0x41], [0xf0, 0x9f, 0x98, 0x41, 0xc3],
  ];
  bad.forEach((b, i) => addS(`invalid/${i}`, b));
  const pool = [0x00, 0x0a, 0x1f, 0x20, 0x22, 0x41, 0x5c, 0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc2, 0xc3, 0xdf, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff];
  for (let i = 0; i < 2000; i++) {
    const n = Math.floor(rnd() * 24);
    const b = [];
    for (let k = 0; k < n; k++) b.push(rnd() < 0.5 ? pool[Math.floor(rnd() * pool.length)] : Math.floor(rnd() * 256));
    addS(`random/${i}`, b);
  }
  return lines;
}
