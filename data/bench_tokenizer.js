// bench_tokenizer.js: encoding speed of the npm package gpt-tokenizer (GPT-2's r50k_base) on a
// text file, best of N, timing the encode call only; prints its ids to compare with the C ones.
//   node data/bench_tokenizer.js PACKAGE_DIR TEXT_FILE N IDS_OUT
'use strict';
const fs = require('fs');
const path = require('path');
const [dir, file, reps, idsOut] = process.argv.slice(2);
const enc = require(path.resolve(dir, 'cjs/encoding/r50k_base.js'));
const text = fs.readFileSync(file, 'utf8');
const bytes = Buffer.byteLength(text);
let best = Infinity, first = 0, ids;
for (let r = 0; r < Number(reps); r++) {
    const t0 = process.hrtime.bigint();
    ids = enc.encode(text);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r === 0) first = ms;
    if (ms < best) best = ms;
}
fs.writeFileSync(idsOut, ids.join(' ') + '\n');
console.log(`gpt-tokenizer (node): ${bytes} bytes -> ${ids.length} tokens in ${best.toFixed(1)} ms (best of ${reps}; first run ${first.toFixed(1)} ms): ` +
    `${(bytes / best / 1e3).toFixed(2)} MB/s, ${(ids.length / best / 1e3).toFixed(3)} M tokens/s`);
