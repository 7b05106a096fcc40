// test_tokenizer_exact.js: the C tokenizer against an independent implementation, the npm
// package gpt-3-encoder (OpenAI's encoder.py ported to JavaScript), run here on node.
//
//   node test/test_tokenizer_exact.js REF_DIR TOKENIZER_FILE TOKENIZE_BIN WORK_DIR
//
// Checks: token ids identical on a varied corpus (prose, code, numbers, contractions, whitespace,
// many scripts, emoji, the special token, random strings, KJV and the fortunes when their Debian
// packages are installed); decoding the reference's ids gives the text back; the special-token
// option; the character classes of every code point against this engine's /\p{L}/u, /\p{N}/u,
// /\s/u; the UTF-8 printer against TextDecoder.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const [refDir, tokFile, tokenizeBin, workDir] = process.argv.slice(2);
const ref = require(path.resolve(refDir, 'Encoder.js'));
fs.mkdirSync(workDir, { recursive: true });
let failures = 0;
const pass = (name) => console.log(`PASS ${name}`);
const fail = (name, why) => { console.log(`FAIL ${name}: ${why}`); failures++; };

// gpt-3-encoder joins its output with Array.concat per piece, which is quadratic on long texts.
// Long texts are therefore given to it in chunks cut right after a "\n" that has non-space
// characters on both sides: the pattern always ends a piece there ("X" ends, "\n" alone is
// "\s+" because a non-space follows, "Y" starts a piece), so the ids are those of the whole text.
function refEncode(text) {
    if (text.length < 65536) return ref.encode(text);
    const out = [];
    let start = 0;
    while (start < text.length) {
        let end = Math.min(text.length, start + 32768);
        while (end < text.length && !(text[end - 1] === '\n' && /\S/.test(text[end - 2] || ' ') && /\S/.test(text[end]))) end++;
        for (const id of ref.encode(text.slice(start, end))) out.push(id);
        start = end;
    }
    return out;
}

// Runs the C tokenizer on several texts at once (NUL-separated); returns one id array per text.
function cEncode(texts, extra = []) {
    const file = path.join(workDir, 'texts.bin');
    fs.writeFileSync(file, Buffer.concat(texts.map((t) => Buffer.concat([Buffer.from(t, 'utf8'), Buffer.from([0])]))));
    const out = execFileSync(tokenizeBin, ['--tokenizer', tokFile, '--nul', ...extra, file], { maxBuffer: 1 << 30 }).toString();
    const lines = out.split('\n');
    lines.pop();
    if (lines.length !== texts.length) throw new Error(`C tokenizer gave ${lines.length} results for ${texts.length} texts`);
    return lines.map((l) => (l.length ? l.split(' ').map(Number) : []));
}

function firstDiff(a, b) {
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    return i;
}

function compare(name, text, want, got) {
    if (want.length === got.length && firstDiff(want, got) === want.length) return pass(name);
    const i = firstDiff(want, got);
    const context = JSON.stringify(ref.decode(want.slice(Math.max(0, i - 3), i + 3)));
    fail(name, `${got.length} ids, reference ${want.length}; first difference at id ${i}: ` +
        `C ${JSON.stringify(got.slice(i, i + 4))} vs reference ${JSON.stringify(want.slice(i, i + 4))} near ${context}`);
}

// ---- the corpus ------------------------------------------------------------------------------
const cases = {
    prose: 'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness...\n' +
        'The quick brown fox jumps over the lazy dog. "Quoted," she said; (parenthetical) — em-dash – en-dash.',
    code_c: 'int main(int argc, char** argv) {\n    for (int i = 0; i < argc; i++) printf("%s\\n", argv[i]);\n\treturn 0;\n}\n',
    code_py: 'def f(x):\n    """Docstring."""\n    return {k: v**2 for k, v in x.items() if v != 0}  # comment\n\n\nclass A(B):\n    pass\n',
    code_js: 'const x = await fetch(`https://example.com/api?q=${encodeURIComponent(q)}&n=10`);\nif (x?.ok) { return [...a, ...b]; }',
    numbers: '0 1 12 123 1234 12345 123456 1234567890 3.14159 -2.5e-10 1,000,000.00 $19.99 50% 0x1F 0b1010 1st 2nd 3rd 4th',
    dates: '2024-05-20 12:34:56Z, 05/20/2024, 20 May 2024, 1999–2001, 10:30am, Q3 FY24, v1.2.3-rc.4',
    contractions: "I'm you're he's she'd we've they'll it's can't won't shouldn't y'all 'tis rock'n'roll o'clock",
    contractions_upper: "I'M YOU'RE HE'S SHE'D WE'VE THEY'LL IT'S CAN'T Don'T We'Ve 'S 'T 'RE 'Ll",
    contractions_curly: 'I’m you’re he’s don’t ‘single’ “double” it’s ’s ’t ‘’',
    apostrophes: "'s's 'ss '' ''s 'x 'r 're're 'lll ' s ' 's'",
    whitespace_runs: 'a  b   c    d     e\t\tf\t \tg \t h\n\ni\n\n\nj \n k  \n  l',
    trailing_spaces: 'line with trailing spaces   \nanother\t\t\nlast   ',
    leading_spaces: '   leading\n    indented\n\tTabbed\n \t mixed',
    crlf: 'windows\r\nline\r\n\r\nendings\r\n  \r\n',
    only_spaces: '          ',
    only_newlines: '\n\n\n\n',
    mixed_space_kinds: 'a\u00a0b\u3000c\u2028d\u2029e\u2009f\u200ag\ufeffh\u0085i\u180ej\u200bk\u000bl\u000cm',
    accented: 'café naïve résumé Ångström Zürich façade Øresund Dvořák Łódź São Paulo İstanbul ﬁnance Æsir',
    greek_cyrillic_hebrew: 'Ελληνικά κείμενα. Русский текст, ёжик! עברית טקסט.',
    cjk: '中文字符测试。日本語のテキスト、カタカナとひらがな。한국어 텍스트입니다. 漢字１２３',
    emoji: '👍 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇺🇸🇯🇵 😀😃😄 ✨🚀 🧑🏿‍💻 1️⃣ #️⃣',
    arabic: 'مرحبا بالعالم! هذا نص عربي ١٢٣٤ مع أرقام.',
    hindi: 'नमस्ते दुनिया! यह हिंदी पाठ है। १२३४',
    thai: 'สวัสดีชาวโลก นี่คือข้อความภาษาไทย ๑๒๓',
    mixed_scripts: 'abc中文123def Русский42 日本語text 😀word العربية123 x²+y³=z⁴ ½ ¾ Ⅻ ⑦',
    math_symbols: '∑∫√π≈≠≤≥∞ ∀x∈ℝ: f(x)=x² → λ ∘ μ ⊕ ⊗',
    special_token: 'Hello<|endoftext|>World <|endoftext|> x <|endoftext|><|endoftext|>\n<|endoftext|> <|endo|>',
    url_email: 'See https://github.com/karpathy/llm.c/blob/master/train_gpt2.cu#L123 or mail me@example.org.',
    json: '{"name": "gpt2", "layers": 12, "heads": [1, 2, 3], "ok": true, "x": null, "s": "a\\"b"}',
    html: '<div class="x"><p>Para&nbsp;graph &amp; more</p><br/></div>',
    base64: 'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk+/==',
    punctuation_runs: '!!! ??? ... --- === *** ### $$$ ((())) [[]] {{}} <<>> ||| ~~~ ^^^ ``` \'\'\' """ ;;; :::',
    control_chars: 'a\u0001b\u0002c\u001bd\u007fe\u001cf\u001fg',
    long_letters: 'a'.repeat(1000) + ' ' + 'ab'.repeat(400) + ' ' + 'Supercalifragilisticexpialidocious'.repeat(20),
    long_digits: '1'.repeat(500) + ' ' + '1234567890'.repeat(50),
    long_punct: '!'.repeat(300) + ' ' + '-='.repeat(200) + ' ' + '.'.repeat(257),
    long_space: ' '.repeat(200) + 'x' + '\n'.repeat(100) + 'y' + ' \t'.repeat(100),
    long_cjk: '这是一个很长的中文句子没有任何空格'.repeat(30),
    long_emoji: '😀'.repeat(100) + '👨‍👩‍👧‍👦'.repeat(20),
};

// Random strings from an alphabet that hits the pattern's edges; seeded, so reproducible.
let seed = 20240520;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed >>> 8) % n; };
const alphabet = [' ', ' ', ' ', '\t', '\n', '\r', '\u00a0', '\u3000', '\ufeff', '\u0085', "'", "'", 's', 't', 'r', 'e',
    'v', 'l', 'm', 'd', 'S', 'A', 'z', '1', '9', '٣', '½', 'é', '中', 'ß', '😀', '\u200d', '!', '-', ',', '.', '’', '#'];
const fuzz = [];
for (let i = 0; i < 3000; i++) {
    let s = '';
    const len = 1 + rnd(24);
    for (let k = 0; k < len; k++) s += alphabet[rnd(alphabet.length)];
    fuzz.push(s);
}

// KJV and the fortunes, from their Debian packages.
const big = {};
try {
    big.kjv = execFileSync('bible', ['gen1:1-rev22:21'], { maxBuffer: 1 << 28 }).toString('utf8');
} catch (e) {
    console.log('SKIP exact_kjv: the bible command is missing (Debian package bible-kjv)');
}
const fortuneDir = '/usr/share/games/fortunes';
if (fs.existsSync(fortuneDir)) {
    const files = fs.readdirSync(fortuneDir).sort().filter((f) => !f.endsWith('.dat') && !f.endsWith('.u8'))
        .map((f) => path.join(fortuneDir, f)).filter((f) => fs.statSync(f).isFile());
    big.fortunes = files.map((f) => fs.readFileSync(f, 'utf8')).join('');
} else {
    console.log(`SKIP exact_fortunes: ${fortuneDir} is missing (Debian package fortunes)`);
}

// ---- encode: C against the reference ---------------------------------------------------------
const names = Object.keys(cases);
const texts = names.map((n) => cases[n]);
const got = cEncode(texts);
names.forEach((n, i) => compare(`exact_${n}`, texts[i], ref.encode(texts[i]), got[i]));

const gotFuzz = cEncode(fuzz);
let fuzzBad = -1;
for (let i = 0; i < fuzz.length && fuzzBad < 0; i++) {
    const want = ref.encode(fuzz[i]);
    if (want.length !== gotFuzz[i].length || firstDiff(want, gotFuzz[i]) !== want.length) fuzzBad = i;
}
if (fuzzBad < 0) pass(`exact_random_strings_${fuzz.length}`);
else fail(`exact_random_strings_${fuzz.length}`, `string ${JSON.stringify(fuzz[fuzzBad])}: C ${JSON.stringify(gotFuzz[fuzzBad])}, reference ${JSON.stringify(ref.encode(fuzz[fuzzBad]))}`);

for (const n of Object.keys(big)) {
    const [g] = cEncode([big[n]]);
    compare(`exact_${n}`, big[n], refEncode(big[n]), g);
}

// A NUL byte cannot travel in --nul mode; one text on its own.
{
    const text = 'nul\u0000inside \u0000\u0000 text';
    const file = path.join(workDir, 'nul.txt');
    fs.writeFileSync(file, text);
    const out = execFileSync(tokenizeBin, ['--tokenizer', tokFile, file]).toString().trim().split(' ').map(Number);
    compare('exact_nul_bytes', text, ref.encode(text), out);
}

// ---- the special-token option: pieces between markers encoded alone, 50256 for each marker ----
{
    const text = cases.special_token;
    const want = [];
    text.split('<|endoftext|>').forEach((part, i) => {
        if (i > 0) want.push(50256);
        for (const id of ref.encode(part)) want.push(id);
    });
    const [g] = cEncode([text], ['--allow-special']);
    compare('allow_special_marks_eot', text, want, g);
}

// ---- decode: the reference's ids give the text back through the C decoder ----------------------
{
    const all = texts.join('');
    const file = path.join(workDir, 'ids.txt');
    fs.writeFileSync(file, ref.encode(all).join(' '));
    const back = execFileSync(tokenizeBin, ['--tokenizer', tokFile, '--decode', file], { maxBuffer: 1 << 28 });
    if (Buffer.compare(back, Buffer.from(all, 'utf8')) === 0) pass('decode_reference_ids');
    else fail('decode_reference_ids', `decoded ${back.length} bytes, expected ${Buffer.byteLength(all)}`);
}

// ---- character classes of every code point ------------------------------------------------------
{
    const lines = execFileSync(tokenizeBin, ['--classes'], { maxBuffer: 1 << 26 }).toString().trim().split('\n');
    const version = lines.pop().split(' ')[1];
    const cls = new Uint8Array(0x110000);
    for (const l of lines) {
        const [a, b, c] = l.split(' ').map(Number);
        cls.fill(c, a, b + 1);
    }
    const reL = /^\p{L}$/u, reN = /^\p{N}$/u, reS = /^\s$/u, reCn = /^\p{Cn}$/u;
    let diff = 0, explained = 0, example = '';
    for (let cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        const s = String.fromCodePoint(cp);
        const js = reL.test(s) ? 1 : reN.test(s) ? 2 : reS.test(s) ? 3 : 0;
        if (js === cls[cp]) continue;
        // Code points this engine's Unicode has not assigned yet: newer tables may classify them.
        if (version !== process.versions.unicode && js === 0 && reCn.test(s)) { explained++; continue; }
        if (!diff) example = `U+${cp.toString(16).toUpperCase()}: C class ${cls[cp]}, node ${js}`;
        diff++;
    }
    const name = 'character_classes_match_reference_engine';
    if (diff === 0) {
        pass(name);
        if (explained) console.log(`  (${explained} code points unassigned in node's Unicode ${process.versions.unicode} are classified by the tables' Unicode ${version})`);
    } else {
        fail(name, `${diff} code points differ (tables: Unicode ${version}, node: Unicode ${process.versions.unicode}), e.g. ${example}; regenerate with make unicode-tables`);
    }
}

// ---- the UTF-8 printer against TextDecoder (replacement per maximal invalid subpart; control ----
// ---- characters as their pictures) ------------------------------------------------------------
{
    const parts = [];
    for (let i = 0; i < 20000; i++) {
        const r = rnd(6);
        if (r === 0) parts.push(Buffer.from([rnd(256)]));
        else if (r === 1) parts.push(Buffer.from([0xC0 + rnd(64), 0x80 + rnd(64)]));
        else if (r === 2) parts.push(Buffer.from([0xE0 + rnd(16), 0x80 + rnd(64), 0x80 + rnd(64)].slice(0, 1 + rnd(3))));
        else if (r === 3) parts.push(Buffer.from([0xF0 + rnd(8), 0x80 + rnd(64), 0x80 + rnd(64), 0x80 + rnd(64)].slice(0, 1 + rnd(4))));
        else parts.push(Buffer.from(alphabet[rnd(alphabet.length)], 'utf8'));
    }
    const bytes = Buffer.concat(parts);
    const file = path.join(workDir, 'random.bin');
    fs.writeFileSync(file, bytes);
    const ids = execFileSync(tokenizeBin, ['--bytes', file], { maxBuffer: 1 << 28 });
    fs.writeFileSync(file + '.ids', ids);
    const raw = execFileSync(tokenizeBin, ['--bytes', '--decode', file + '.ids'], { maxBuffer: 1 << 28 });
    if (Buffer.compare(raw, bytes) === 0) pass('bytes_only_roundtrip_via_cli');
    else fail('bytes_only_roundtrip_via_cli', `${raw.length} bytes back, expected ${bytes.length}`);
    const safe = execFileSync(tokenizeBin, ['--bytes', '--decode', '--safe', file + '.ids'], { maxBuffer: 1 << 28 });
    // TextDecoder's text, with each control character but newline and tab as its Unicode picture
    // (U+2400 + code, DEL U+2421), as the printer shows them.
    const text = new TextDecoder('utf-8').decode(bytes).replace(/[\x00-\x08\x0b-\x1f\x7f]/g,
        c => String.fromCharCode(c === '\x7f' ? 0x2421 : 0x2400 + c.charCodeAt(0)));
    const want = Buffer.from(text, 'utf8');
    if (Buffer.compare(safe, want) === 0) pass('printer_matches_textdecoder');
    else fail('printer_matches_textdecoder', `${safe.length} bytes printed, TextDecoder gives ${want.length} (first difference at byte ${firstDiff(safe, want)})`);
}

process.exit(failures ? 1 : 0);
