// build_tokenizer.c: turns GPT-2's encoder.json and vocab.bpe into the one compact tokenizer
// file the trainer reads (layout in common/tokenizer.h).
//
//   build/build_tokenizer encoder.json vocab.bpe data/vocab/gpt2_bpe.bin
//
// Both inputs spell token bytes through GPT-2's bytes_to_unicode (each byte is one code point);
// here they are mapped back to raw bytes. encoder.json is parsed by hand: it is one flat JSON
// object of "string": integer.
#include <stdint.h>
#include <string.h>

#include "tokenizer.h"
#include "util.h"

typedef struct {
    unsigned char* bytes;
    int len;
} Tok;

static const char* g_path;  // the file being parsed, for messages

// The byte a bytes_to_unicode code point stands for, or -1.
static int unicode_to_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    int k = (int)cp - 256;  // the k-th byte outside the printable ranges
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        if (!printable && k-- == 0) return b;
    }
    return -1;
}

// Appends the raw byte that code point cp stands for.
static void put_cp(unsigned char* out, int* n, uint32_t cp, long where) {
    int b = unicode_to_byte(cp);
    if (b < 0) fatal("%s: character U+%04X at byte %ld is not one of GPT-2's byte characters", g_path, cp, where);
    out[(*n)++] = (unsigned char)b;
}

// Decodes one UTF-8 code point at s; returns its length.
static int utf8_decode(const unsigned char* s, size_t avail, uint32_t* cp, long where) {
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || (size_t)len > avail) fatal("%s: invalid UTF-8 at byte %ld", g_path, where);
    *cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) fatal("%s: invalid UTF-8 at byte %ld", g_path, where);
        *cp = (*cp << 6) | (s[k] & 0x3F);
    }
    return len;
}

static unsigned char* read_all(const char* path, size_t* n) {
    FILE* f = fopen_check(path, "rb");
    long size = file_size(f, path);
    unsigned char* buf = (unsigned char*)malloc_check((size_t)size + 1, path);
    fread_check(buf, 1, (size_t)size, f, path);
    fclose(f);
    buf[size] = 0;
    *n = (size_t)size;
    return buf;
}

static size_t skip_ws(const unsigned char* s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    return i;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Parses encoder.json into toks[id]; returns the vocabulary size.
static int parse_encoder(const char* path, Tok** toks_out) {
    size_t n;
    unsigned char* s = read_all(path, &n);
    g_path = path;
    int cap = 65536, vocab = 0;
    Tok* toks = (Tok*)calloc_check((size_t)cap, sizeof(Tok), "vocabulary");
    unsigned char key[1024];
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') fatal("%s: expected a JSON object (GPT-2's encoder.json)", path);
    i = skip_ws(s, n, i + 1);
    while (i < n && s[i] != '}') {
        if (s[i] != '"') fatal("%s: expected a string key at byte %zu", path, i);
        int klen = 0;
        i++;
        while (i < n && s[i] != '"') {
            uint32_t cp;
            if (klen > (int)sizeof(key) - 8) fatal("%s: key too long at byte %zu", path, i);
            if (s[i] == '\\') {
                if (i + 1 >= n) break;
                int e = s[i + 1];
                i += 2;
                if (e == 'u') {
                    int v = 0;
                    for (int k = 0; k < 4; k++) {
                        int h = i + k < n ? hexval(s[i + k]) : -1;
                        if (h < 0) fatal("%s: bad \\u escape at byte %zu", path, i);
                        v = v * 16 + h;
                    }
                    i += 4;
                    cp = (uint32_t)v;
                } else if (e == '"' || e == '\\' || e == '/') cp = (uint32_t)e;
                else if (e == 'b') cp = '\b';
                else if (e == 'f') cp = '\f';
                else if (e == 'n') cp = '\n';
                else if (e == 'r') cp = '\r';
                else if (e == 't') cp = '\t';
                else fatal("%s: bad escape \\%c at byte %zu", path, e, i - 2);
            } else {
                i += (size_t)utf8_decode(s + i, n - i, &cp, (long)i);
            }
            put_cp(key, &klen, cp, (long)i);
        }
        if (i >= n) fatal("%s: unterminated string", path);
        i = skip_ws(s, n, i + 1);
        if (i >= n || s[i] != ':') fatal("%s: expected ':' at byte %zu", path, i);
        i = skip_ws(s, n, i + 1);
        long id = 0;
        int digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 9) { id = id * 10 + (s[i++] - '0'); digits++; }
        if (digits == 0 || id >= cap) fatal("%s: expected a token id below %d at byte %zu", path, cap, i);
        if (toks[id].bytes) fatal("%s: token id %ld appears twice", path, id);
        if (klen == 0 || klen > 255) fatal("%s: token %ld has %d bytes, expected 1..255", path, id, klen);
        toks[id].bytes = (unsigned char*)malloc_check((size_t)klen, "token");
        memcpy(toks[id].bytes, key, (size_t)klen);
        toks[id].len = klen;
        if (id + 1 > vocab) vocab = (int)id + 1;
        i = skip_ws(s, n, i);
        if (i < n && s[i] == ',') i = skip_ws(s, n, i + 1);
    }
    if (i >= n) fatal("%s: unterminated JSON object", path);
    for (int k = 0; k < vocab; k++)
        if (!toks[k].bytes) fatal("%s: token id %d is missing (ids must run 0..%d)", path, k, vocab - 1);
    free(s);
    *toks_out = toks;
    return vocab;
}

// Token bytes -> id, open addressing.
typedef struct {
    int* slots;
    uint64_t mask;
    const Tok* toks;
} TokMap;

static uint64_t bytes_hash(const unsigned char* s, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static void tokmap_init(TokMap* m, const Tok* toks, int vocab) {
    uint64_t cap = 1;
    while (cap < 4ull * (uint64_t)vocab) cap <<= 1;
    m->slots = (int*)malloc_check(cap * sizeof(int), "token map");
    for (uint64_t i = 0; i < cap; i++) m->slots[i] = -1;
    m->mask = cap - 1;
    m->toks = toks;
    for (int id = 0; id < vocab; id++) {
        uint64_t h = bytes_hash(toks[id].bytes, toks[id].len) & m->mask;
        while (m->slots[h] >= 0) {
            const Tok* o = &toks[m->slots[h]];
            if (o->len == toks[id].len && memcmp(o->bytes, toks[id].bytes, (size_t)o->len) == 0)
                fatal("%s: tokens %d and %d have the same bytes", g_path, m->slots[h], id);
            h = (h + 1) & m->mask;
        }
        m->slots[h] = id;
    }
}

static int tokmap_find(const TokMap* m, const unsigned char* s, int n) {
    for (uint64_t h = bytes_hash(s, n) & m->mask;; h = (h + 1) & m->mask) {
        int id = m->slots[h];
        if (id < 0) return -1;
        if (m->toks[id].len == n && memcmp(m->toks[id].bytes, s, (size_t)n) == 0) return id;
    }
}

// Parses vocab.bpe ("#version" line, then "left right" per line, in rank order) into id triples.
static int parse_merges(const char* path, const TokMap* map, int32_t** out) {
    size_t n;
    unsigned char* s = read_all(path, &n);
    g_path = path;
    int cap = 1024, count = 0;
    int32_t* m = (int32_t*)malloc_check((size_t)cap * 3 * sizeof(int32_t), "merges");
    size_t i = 0;
    int line = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && s[end] != '\n') end++;
        line++;
        size_t stop = end;
        if (stop > i && s[stop - 1] == '\r') stop--;
        if (line == 1 && stop - i >= 8 && memcmp(s + i, "#version", 8) == 0) { i = end + 1; continue; }
        if (stop == i) { i = end + 1; continue; }
        unsigned char parts[2][520];
        int plen[2] = {0, 0}, np = 0;
        size_t k = i;
        while (k < stop) {
            while (k < stop && s[k] == ' ') k++;
            if (k >= stop) break;
            if (np == 2) fatal("%s: line %d has more than two tokens", path, line);
            while (k < stop && s[k] != ' ') {
                uint32_t cp;
                k += (size_t)utf8_decode(s + k, stop - k, &cp, (long)k);
                if (plen[np] >= 512) fatal("%s: line %d: token too long", path, line);
                put_cp(parts[np], &plen[np], cp, (long)k);
            }
            np++;
        }
        if (np != 2) fatal("%s: line %d: expected two tokens separated by a space", path, line);
        unsigned char joined[1040];
        memcpy(joined, parts[0], (size_t)plen[0]);
        memcpy(joined + plen[0], parts[1], (size_t)plen[1]);
        int a = tokmap_find(map, parts[0], plen[0]), b = tokmap_find(map, parts[1], plen[1]);
        int c = tokmap_find(map, joined, plen[0] + plen[1]);
        if (a < 0 || b < 0 || c < 0) fatal("%s: line %d: merge of tokens missing from the vocabulary", path, line);
        if (count == cap) {
            cap *= 2;
            m = (int32_t*)realloc(m, (size_t)cap * 3 * sizeof(int32_t));
            if (!m) fatal("out of host memory reading %s", path);
        }
        m[3 * count] = a; m[3 * count + 1] = b; m[3 * count + 2] = c;
        count++;
        i = end + 1;
    }
    free(s);
    *out = m;
    return count;
}

static void put32(FILE* f, int32_t v, const char* path) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    fwrite_check(b, 1, 4, f, path);
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s encoder.json vocab.bpe out.bin\n"
                        "Writes GPT-2's tokenizer as one file (layout in common/tokenizer.h).\n", argv[0]);
        return 1;
    }
    Tok* toks;
    int vocab = parse_encoder(argv[1], &toks);
    TokMap map;
    tokmap_init(&map, toks, vocab);
    int32_t* merges;
    int n_merges = parse_merges(argv[2], &map, &merges);
    int eot = tokmap_find(&map, (const unsigned char*)GPT2_EOT_TEXT, (int)strlen(GPT2_EOT_TEXT));
    long token_bytes = 0;
    for (int i = 0; i < vocab; i++) token_bytes += toks[i].len;

    char tmp[4200];
    FILE* f = atomic_open(argv[3], tmp, sizeof(tmp));
    int32_t header[TOKENIZER_HEADER_INTS] = {TOKENIZER_MAGIC, TOKENIZER_VERSION, vocab, n_merges, eot,
                                              (int32_t)token_bytes, 0, 0};
    for (int i = 0; i < TOKENIZER_HEADER_INTS; i++) put32(f, header[i], tmp);
    for (int i = 0; i < vocab; i++) {
        unsigned char len = (unsigned char)toks[i].len;
        fwrite_check(&len, 1, 1, f, tmp);
    }
    for (int i = 0; i < vocab; i++) fwrite_check(toks[i].bytes, 1, (size_t)toks[i].len, f, tmp);
    for (int i = 0; i < 3 * n_merges; i++) put32(f, merges[i], tmp);
    atomic_close(f, tmp, argv[3]);

    // Read it back: tokenizer_load checks every rule the trainer relies on.
    Tokenizer* t = tokenizer_load(argv[3]);
    printf("wrote %s: %d tokens, %d merges, end-of-text id %d\n", argv[3], vocab, n_merges, eot);
    tokenizer_free(t);
    for (int i = 0; i < vocab; i++) free(toks[i].bytes);
    free(toks); free(map.slots); free(merges);
    return 0;
}
