// tokenizer.c: GPT-2 BPE encode/decode, the tokenizer file reader, and the UTF-8 printer
// (see tokenizer.h for the rules and the file layout).
#define _GNU_SOURCE  // memmem
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "unicode_tables.h"
#include "util.h"

// ---------------------------------------------------------------------------------------------
// Byte tokens: GPT-2's bytes_to_unicode lists the printable bytes 33..126, 161..172 and 174..255
// first, then the other 68 bytes in increasing order; a byte's token id is its place in that list.

int tokenizer_byte_token(unsigned char b) {
    if (b >= 33 && b <= 126) return b - 33;
    if (b >= 161 && b <= 172) return 94 + (b - 161);
    if (b >= 174) return 106 + (b - 174);
    if (b <= 32) return 188 + b;
    if (b <= 160) return 188 + 33 + (b - 127);
    return 255;  // 173, the soft hyphen
}

// ---------------------------------------------------------------------------------------------
// The tokenizer

typedef struct {
    uint64_t key;  // left << 32 | right; MERGE_EMPTY when the slot is free
    int32_t rank;
    int32_t result;
} MergeSlot;
#define MERGE_EMPTY UINT64_MAX

// Cache of encoded pieces: most words repeat, and a hit skips BPE entirely.
typedef struct {
    uint64_t hash;  // 0: empty slot
    uint32_t key_off, tok_off;
    uint16_t key_len, ntok;
} CacheSlot;
#define CACHE_SLOTS (1u << 17)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_KEY_BYTES (4u << 20)
#define CACHE_TOKENS (1u << 20)
#define CACHE_MAX_WORD 255

struct Tokenizer {
    int vocab_size, n_merges, eot, can_merge;
    int llmc;                   // loaded from llm.c's file: decodes every id, no merges
    uint32_t* offsets;          // vocab_size + 1 offsets into bytes (loaded file only)
    unsigned char* bytes;
    unsigned char byte_of_id[256];
    MergeSlot* merges;          // open addressing, merge_mask + 1 slots
    uint64_t merge_mask;
    int merge_bits;
    // word cache
    CacheSlot* cache;
    unsigned char* cache_keys;
    int* cache_toks;
    uint32_t cache_entries, cache_key_used, cache_tok_used;
    // BPE scratch, grown as needed
    int32_t *sym, *prev, *next, *rank;
    uint64_t* heap;
    size_t scratch_cap;
};

// The file has a name of its own: llm.c's `gpt2_tokenizer.bin` is another format (decode-only here,
// and ours stops llm.c). A checkout whose `make vocab` ran before the rename keeps working.
const char* tokenizer_default_path(void) {
    if (!file_exists(TOKENIZER_DEFAULT_PATH) && file_exists(TOKENIZER_OLD_PATH)) return TOKENIZER_OLD_PATH;
    return TOKENIZER_DEFAULT_PATH;
}

static inline uint64_t merge_hash(uint64_t key, int bits) {
    return (key * 0x9E3779B97F4A7C15ull) >> (64 - bits);
}

// Rank of merging (left, right), or -1; the merged id goes to *result.
static inline int32_t merge_find(const Tokenizer* t, int32_t left, int32_t right, int32_t* result) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    for (uint64_t h = merge_hash(key, t->merge_bits);; h = (h + 1) & t->merge_mask) {
        const MergeSlot* s = &t->merges[h];
        if (s->key == key) { *result = s->result; return s->rank; }
        if (s->key == MERGE_EMPTY) return -1;
    }
}

static void tokenizer_init_common(Tokenizer* t) {
    for (int b = 0; b < 256; b++) t->byte_of_id[tokenizer_byte_token((unsigned char)b)] = (unsigned char)b;
    if (!t->can_merge) return;  // byte tokens need no cache
    t->cache = (CacheSlot*)calloc_check(CACHE_SLOTS, sizeof(CacheSlot), "tokenizer cache");
    t->cache_keys = (unsigned char*)malloc_check(CACHE_KEY_BYTES, "tokenizer cache");
    t->cache_toks = (int*)malloc_check(CACHE_TOKENS * sizeof(int), "tokenizer cache");
}

Tokenizer* tokenizer_bytes_only(void) {
    Tokenizer* t = (Tokenizer*)calloc_check(1, sizeof(Tokenizer), "tokenizer");
    t->vocab_size = GPT2_VOCAB_SIZE;
    t->eot = GPT2_EOT;
    tokenizer_init_common(t);
    return t;
}

static int32_t rd32(const unsigned char* p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return (int32_t)v;
}

// llm.c's tokenizer file (what its train_gpt2.py writes as gpt2_tokenizer.bin): 256 uint32 header
// {20240328, version 1 or 2, vocab_size, eot (version 2), 0...}, then per token a uint8 length
// (1..255) and its bytes. It has no merges: it decodes, it cannot encode.
static Tokenizer* tokenizer_load_llmc(const char* path, const unsigned char* data, long size) {
    const long header_bytes = 256 * 4;
    if (size < header_bytes)
        fatal("tokenizer file %s (llm.c's magic %d) is %ld bytes, too small for its %ld-byte header", path,
              LLMC_TOKENIZER_MAGIC, size, header_bytes);
    int version = rd32(data + 4), vocab = rd32(data + 8), eot = version == 1 ? GPT2_EOT : rd32(data + 12);
    if (version != 1 && version != 2) fatal("tokenizer file %s (llm.c's) has version %d, expected 1 or 2", path, version);
    if (vocab < 1 || vocab > 65536) fatal("tokenizer file %s (llm.c's): vocabulary size %d, expected 1..65536", path, vocab);
    if (version == 1 && vocab != GPT2_VOCAB_SIZE)
        fatal("tokenizer file %s (llm.c's version 1): vocabulary size %d, expected GPT-2's %d", path, vocab, GPT2_VOCAB_SIZE);
    if (eot < 0 || eot >= vocab) fatal("tokenizer file %s (llm.c's): end-of-text id %d outside the vocabulary", path, eot);
    Tokenizer* t = (Tokenizer*)calloc_check(1, sizeof(Tokenizer), "tokenizer");
    t->vocab_size = vocab;
    t->eot = eot;
    t->llmc = 1;
    tokenizer_init_common(t);
    t->offsets = (uint32_t*)malloc_check((size_t)(vocab + 1) * sizeof(uint32_t), "token offsets");
    // First pass: the lengths, each token inside the file.
    long at = header_bytes, total = 0;
    for (int i = 0; i < vocab; i++) {
        if (at >= size) fatal("tokenizer file %s (llm.c's) ends at token %d of %d", path, i, vocab);
        int len = data[at];
        if (len == 0) fatal("tokenizer file %s (llm.c's): token %d has no bytes", path, i);
        if (at + 1 + len > size) fatal("tokenizer file %s (llm.c's) ends inside token %d", path, i);
        t->offsets[i] = (uint32_t)total;
        total += len;
        at += 1 + len;
    }
    if (at != size) fatal("tokenizer file %s (llm.c's): %ld bytes follow its %d tokens", path, size - at, vocab);
    t->offsets[vocab] = (uint32_t)total;
    t->bytes = (unsigned char*)malloc_check((size_t)total, "token bytes");
    at = header_bytes;
    for (int i = 0; i < vocab; i++) {
        int len = data[at];
        memcpy(t->bytes + t->offsets[i], data + at + 1, (size_t)len);
        at += 1 + len;
    }
    return t;
}

static Tokenizer* tokenizer_open(const char* path, int decode_only) {
    char why[4400];
    FILE* f = fopen_read_try(path, why, sizeof(why));
    if (!f && !file_exists(path))
        fatal("cannot open tokenizer file %s (run `make vocab` to create it, or use byte-level tokens)", path);
    if (!f) fatal("tokenizer: %s", why);
    long size = file_size(f, path);
    const long header_bytes = TOKENIZER_HEADER_INTS * 4;
    if (size < header_bytes)
        fatal("tokenizer file %s is %ld bytes, too small for its %ld-byte header", path, size, header_bytes);
    unsigned char* data = (unsigned char*)malloc_check((size_t)size, path);
    fread_check(data, 1, (size_t)size, f, path);
    fclose(f);
    int32_t h[TOKENIZER_HEADER_INTS];
    for (int i = 0; i < TOKENIZER_HEADER_INTS; i++) h[i] = rd32(data + 4 * i);
    if (h[0] == LLMC_TOKENIZER_MAGIC) {
        if (!decode_only)
            fatal("tokenizer file %s is llm.c's (magic %d): it holds no merges, so it decodes samples (-K) but cannot "
                  "encode text; `make vocab` writes one that can", path, LLMC_TOKENIZER_MAGIC);
        Tokenizer* t = tokenizer_load_llmc(path, data, size);
        free(data);
        return t;
    }
    if (h[0] != TOKENIZER_MAGIC)
        fatal("tokenizer file %s has magic %d, expected %d (a GPT-2 tokenizer file made by `make vocab`)%s",
              path, h[0], TOKENIZER_MAGIC, decode_only ? " or llm.c's 20240328" : "");
    if (h[1] != TOKENIZER_VERSION) fatal("tokenizer file %s has version %d, expected %d", path, h[1], TOKENIZER_VERSION);
    int vocab = h[2], n_merges = h[3], eot = h[4];
    long token_bytes = h[5];
    if (vocab < 256 || vocab > 65536) fatal("tokenizer file %s: vocabulary size %d, expected 256..65536", path, vocab);
    if (n_merges < 0 || n_merges > vocab - 256)
        fatal("tokenizer file %s: %d merges, expected 0..%d", path, n_merges, vocab - 256);
    if (eot < -1 || eot >= vocab) fatal("tokenizer file %s: end-of-text id %d outside the vocabulary", path, eot);
    if (token_bytes < vocab || token_bytes > 255L * vocab)
        fatal("tokenizer file %s: %ld token bytes for %d tokens", path, token_bytes, vocab);
    long expect = header_bytes + vocab + token_bytes + 12L * n_merges;
    if (size != expect)
        fatal("tokenizer file %s is %ld bytes, expected %ld from its header (truncated or not a tokenizer file)",
              path, size, expect);

    Tokenizer* t = (Tokenizer*)calloc_check(1, sizeof(Tokenizer), "tokenizer");
    t->vocab_size = vocab;
    t->n_merges = n_merges;
    t->eot = eot;
    t->can_merge = 1;
    tokenizer_init_common(t);
    const unsigned char* lens = data + header_bytes;
    t->offsets = (uint32_t*)malloc_check((size_t)(vocab + 1) * sizeof(uint32_t), "token offsets");
    t->bytes = (unsigned char*)malloc_check((size_t)token_bytes, "token bytes");
    memcpy(t->bytes, lens + vocab, (size_t)token_bytes);
    uint32_t off = 0;
    for (int i = 0; i < vocab; i++) {
        if (lens[i] == 0) fatal("tokenizer file %s: token %d has no bytes", path, i);
        t->offsets[i] = off;
        off += lens[i];
    }
    t->offsets[vocab] = off;
    if (off != (uint32_t)token_bytes)
        fatal("tokenizer file %s: token lengths add up to %u bytes, header says %ld", path, off, token_bytes);
    for (int i = 0; i < 256; i++) {
        if (lens[i] != 1 || t->bytes[t->offsets[i]] != t->byte_of_id[i])
            fatal("tokenizer file %s: token %d is not byte 0x%02x (ids 0..255 must be the bytes in GPT-2's order)",
                  path, i, t->byte_of_id[i]);
    }

    // Merges: each part must exist before its merge (so rank order is creation order, which makes
    // merging the lowest-ranked pair one at a time equal GPT-2's pass-by-pass loop).
    int bits = 8;
    while ((1L << bits) < 2L * n_merges + 2) bits++;
    t->merge_bits = bits;
    t->merge_mask = (1ull << bits) - 1;
    t->merges = (MergeSlot*)malloc_check(((size_t)1 << bits) * sizeof(MergeSlot), "merge table");
    for (uint64_t i = 0; i <= t->merge_mask; i++) t->merges[i].key = MERGE_EMPTY;
    int32_t* made_at = (int32_t*)malloc_check((size_t)vocab * sizeof(int32_t), "merge check");
    for (int i = 0; i < vocab; i++) made_at[i] = i < 256 ? -1 : INT32_MAX;
    const unsigned char* m = lens + vocab + token_bytes;
    for (int r = 0; r < n_merges; r++, m += 12) {
        int32_t a = rd32(m), b = rd32(m + 4), c = rd32(m + 8);
        if (a < 0 || a >= vocab || b < 0 || b >= vocab || c < 256 || c >= vocab)
            fatal("tokenizer file %s: merge %d has ids (%d, %d -> %d) outside the vocabulary", path, r, a, b, c);
        if (made_at[a] >= r || made_at[b] >= r)
            fatal("tokenizer file %s: merge %d uses a token not made by an earlier merge", path, r);
        if (made_at[c] != INT32_MAX) fatal("tokenizer file %s: merge %d makes token %d a second time", path, r, c);
        made_at[c] = r;
        uint32_t la = lens[a], lb = lens[b];
        if (lens[c] != la + lb || memcmp(t->bytes + t->offsets[c], t->bytes + t->offsets[a], la) != 0 ||
            memcmp(t->bytes + t->offsets[c] + la, t->bytes + t->offsets[b], lb) != 0)
            fatal("tokenizer file %s: merge %d: token %d is not tokens %d and %d joined", path, r, c, a, b);
        uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        uint64_t hh = merge_hash(key, bits);
        while (t->merges[hh].key != MERGE_EMPTY) {
            if (t->merges[hh].key == key) fatal("tokenizer file %s: merge %d repeats the pair (%d, %d)", path, r, a, b);
            hh = (hh + 1) & t->merge_mask;
        }
        t->merges[hh].key = key;
        t->merges[hh].rank = r;
        t->merges[hh].result = c;
    }
    free(made_at);
    free(data);
    return t;
}

void tokenizer_free(Tokenizer* t) {
    if (!t) return;
    free(t->offsets); free(t->bytes); free(t->merges);
    free(t->cache); free(t->cache_keys); free(t->cache_toks);
    free(t->sym); free(t->prev); free(t->next); free(t->rank); free(t->heap);
    free(t);
}

Tokenizer* tokenizer_load(const char* path) { return tokenizer_open(path, 0); }
Tokenizer* tokenizer_load_decoder(const char* path) { return tokenizer_open(path, 1); }
int tokenizer_is_llmc(const Tokenizer* t) { return t->llmc; }

int tokenizer_can_merge(const Tokenizer* t) { return t->can_merge; }
int tokenizer_vocab_size(const Tokenizer* t) { return t->vocab_size; }
int tokenizer_eot(const Tokenizer* t) { return t->eot; }

const unsigned char* tokenizer_decode(const Tokenizer* t, int id, size_t* len) {
    static const char eot_text[] = GPT2_EOT_TEXT;
    *len = 0;
    if (id < 0 || id >= t->vocab_size) return NULL;
    if (t->offsets) {
        *len = t->offsets[id + 1] - t->offsets[id];
        return t->bytes + t->offsets[id];
    }
    if (id < 256) { *len = 1; return &t->byte_of_id[id]; }
    if (id == t->eot) { *len = sizeof(eot_text) - 1; return (const unsigned char*)eot_text; }
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenization: the pattern's alternatives, tried in order at each position.

int tokenizer_codepoint_class(uint32_t cp) {
    if (cp < 128) return unicode_ascii_class[cp];
    int lo = 0, hi = UNICODE_NRANGES - 1;
    while (lo <= hi) {
        int mid = (lo + hi) >> 1;
        if (cp < unicode_ranges[mid].first) hi = mid - 1;
        else if (cp > unicode_ranges[mid].last) lo = mid + 1;
        else return unicode_ranges[mid].cls;
    }
    return UCLASS_OTHER;
}

// Length of the character at s[i] (1 for a byte that does not start valid UTF-8: such a byte
// is one "other" character on its own) and its class in *cls.
static inline size_t char_at(const unsigned char* s, size_t n, size_t i, int* cls) {
    unsigned c = s[i];
    if (c < 0x80) { *cls = unicode_ascii_class[c]; return 1; }
    uint32_t cp;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; cp = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; cp = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else { *cls = UCLASS_OTHER; return 1; }
    if (i + len > n) { *cls = UCLASS_OTHER; return 1; }
    for (size_t k = 1; k < len; k++) {
        unsigned d = s[i + k];
        if (d < lo || d > hi) { *cls = UCLASS_OTHER; return 1; }
        lo = 0x80; hi = 0xBF;
        cp = (cp << 6) | (d & 0x3F);
    }
    *cls = tokenizer_codepoint_class(cp);
    return len;
}

static inline size_t class_run_end(const unsigned char* s, size_t n, size_t i, int cls) {
    while (i < n) {
        if (s[i] < 0x80) {
            if (unicode_ascii_class[s[i]] != cls) break;
            i++;
            continue;
        }
        int c;
        size_t len = char_at(s, n, i, &c);
        if (c != cls) break;
        i += len;
    }
    return i;
}

// End of the piece that starts at s[i] (i < n).
static size_t piece_end(const unsigned char* s, size_t n, size_t i) {
    unsigned c = s[i];
    if (c == '\'' && i + 1 < n) {  // 's 't 're 've 'm 'll 'd (lowercase only, like the pattern)
        unsigned d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned e = s[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    int cls;
    size_t len = char_at(s, n, i, &cls);
    if (c == ' ' && i + 1 < n) {  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
        int next_cls;
        size_t next_len = char_at(s, n, i + 1, &next_cls);
        if (next_cls != UCLASS_SPACE) return class_run_end(s, n, i + 1 + next_len, next_cls);
    }
    if (cls != UCLASS_SPACE) return class_run_end(s, n, i + len, cls);
    // Whitespace: "\s+(?!\S)" takes the run but leaves its last character to the next piece
    // when a non-space follows; a lone whitespace character before a non-space is "\s+".
    size_t j = i + len, last = i;
    while (j < n) {
        int c2;
        size_t l2 = char_at(s, n, j, &c2);
        if (c2 != UCLASS_SPACE) break;
        last = j;
        j += l2;
    }
    if (j == n || last == i) return j;
    return last;
}

// ---------------------------------------------------------------------------------------------
// BPE on one piece. Merging the lowest-ranked pair (leftmost among equals) one at a time gives
// GPT-2's result, because a merge's parts always come from lower ranks (checked at load).

static void scratch_reserve(Tokenizer* t, size_t n) {
    if (n <= t->scratch_cap) return;
    size_t cap = n < 256 ? 256 : n * 2;
    free(t->sym); free(t->prev); free(t->next); free(t->rank); free(t->heap);
    t->sym = (int32_t*)malloc_check(cap * sizeof(int32_t), "BPE scratch");
    t->prev = (int32_t*)malloc_check(cap * sizeof(int32_t), "BPE scratch");
    t->next = (int32_t*)malloc_check(cap * sizeof(int32_t), "BPE scratch");
    t->rank = (int32_t*)malloc_check(cap * sizeof(int32_t), "BPE scratch");
    t->heap = (uint64_t*)malloc_check(3 * cap * sizeof(uint64_t), "BPE scratch");
    t->scratch_cap = cap;
}

// Short pieces: an array and a linear scan for the best pair (fastest for a few symbols).
static size_t bpe_short(const Tokenizer* t, int32_t* sym, int32_t* rank, size_t m) {
    int32_t result = 0;
    for (size_t k = 0; k + 1 < m; k++) rank[k] = merge_find(t, sym[k], sym[k + 1], &result);
    while (m > 1) {
        size_t best = m;
        int32_t best_rank = INT32_MAX;
        for (size_t k = 0; k + 1 < m; k++)
            if (rank[k] >= 0 && rank[k] < best_rank) { best_rank = rank[k]; best = k; }
        if (best == m) break;
        merge_find(t, sym[best], sym[best + 1], &result);
        sym[best] = result;
        memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof(int32_t));
        memmove(rank + best + 1, rank + best + 2, (m - best - 2) * sizeof(int32_t));
        m--;
        if (best > 0) rank[best - 1] = merge_find(t, sym[best - 1], sym[best], &result);
        if (best + 1 < m) rank[best] = merge_find(t, sym[best], sym[best + 1], &result);
    }
    return m;
}

static inline void heap_push(uint64_t* heap, size_t* n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (heap[p] <= v) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i] = v;
}

static inline uint64_t heap_pop(uint64_t* heap, size_t* n) {
    uint64_t top = heap[0], v = heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= v) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
    return top;
}

// Long pieces: a linked list and a heap of (rank, position) keys, O(m log m). A popped key is
// stale when the pair now at its position has another rank (ranks name pairs uniquely).
static size_t bpe_long(const Tokenizer* t, int32_t* sym, int32_t* prev, int32_t* next, uint64_t* heap, size_t m) {
    size_t hn = 0;
    int32_t result = 0;
    for (size_t k = 0; k < m; k++) {
        prev[k] = (int32_t)k - 1;
        next[k] = k + 1 < m ? (int32_t)k + 1 : -1;
    }
    for (size_t k = 0; k + 1 < m; k++) {
        int32_t r = merge_find(t, sym[k], sym[k + 1], &result);
        if (r >= 0) heap_push(heap, &hn, (uint64_t)r << 32 | k);
    }
    while (hn > 0) {
        uint64_t top = heap_pop(heap, &hn);
        int32_t r = (int32_t)(top >> 32), k = (int32_t)(top & 0xFFFFFFFFu);
        if (sym[k] < 0 || next[k] < 0) continue;
        int32_t nx = next[k];
        if (merge_find(t, sym[k], sym[nx], &result) != r) continue;
        sym[k] = result;
        sym[nx] = -1;
        next[k] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = k;
        if (prev[k] >= 0) {
            int32_t r2 = merge_find(t, sym[prev[k]], sym[k], &result);
            if (r2 >= 0) heap_push(heap, &hn, (uint64_t)r2 << 32 | (uint32_t)prev[k]);
        }
        if (next[k] >= 0) {
            int32_t r2 = merge_find(t, sym[k], sym[next[k]], &result);
            if (r2 >= 0) heap_push(heap, &hn, (uint64_t)r2 << 32 | (uint32_t)k);
        }
    }
    size_t out = 0;
    for (int32_t k = 0; k >= 0; k = next[k]) sym[out++] = sym[k];
    return out;
}

#define BPE_SHORT_MAX 24

static uint64_t piece_hash(const unsigned char* s, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        s += 8; n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    return h | 1;  // 0 marks an empty slot
}

static void cache_clear(Tokenizer* t) {
    memset(t->cache, 0, CACHE_SLOTS * sizeof(CacheSlot));
    t->cache_entries = t->cache_key_used = t->cache_tok_used = 0;
}

static inline void out_reserve(int** out, size_t* cap, size_t need) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    int* p = (int*)realloc(*out, c * sizeof(int));
    if (!p) fatal("out of host memory growing the token buffer to %zu tokens", c);
    *out = p;
    *cap = c;
}

static size_t encode_piece(Tokenizer* t, const unsigned char* s, size_t m, int** out, size_t n, size_t* cap) {
    out_reserve(out, cap, n + m);
    int* o = *out + n;
    if (m == 1 || !t->can_merge) {
        for (size_t k = 0; k < m; k++) o[k] = tokenizer_byte_token(s[k]);
        return n + m;
    }
    uint64_t h = 0;
    uint32_t slot = 0;
    if (m <= CACHE_MAX_WORD) {
        h = piece_hash(s, m);
        for (slot = (uint32_t)(h >> 40) & (CACHE_SLOTS - 1);; slot = (slot + 1) & (CACHE_SLOTS - 1)) {
            CacheSlot* e = &t->cache[slot];
            if (e->hash == 0) break;
            if (e->hash == h && e->key_len == m && memcmp(t->cache_keys + e->key_off, s, m) == 0) {
                memcpy(o, t->cache_toks + e->tok_off, e->ntok * sizeof(int));
                return n + e->ntok;
            }
        }
    }
    scratch_reserve(t, m);
    int32_t* sym = t->sym;
    for (size_t k = 0; k < m; k++) sym[k] = tokenizer_byte_token(s[k]);
    size_t k_out = m <= BPE_SHORT_MAX ? bpe_short(t, sym, t->rank, m) : bpe_long(t, sym, t->prev, t->next, t->heap, m);
    for (size_t k = 0; k < k_out; k++) o[k] = sym[k];
    if (m <= CACHE_MAX_WORD) {
        if (t->cache_entries >= CACHE_MAX_ENTRIES || t->cache_key_used + m > CACHE_KEY_BYTES ||
            t->cache_tok_used + k_out > CACHE_TOKENS) {
            cache_clear(t);  // simple and rare: the hot words come back within a few lines
            for (slot = (uint32_t)(h >> 40) & (CACHE_SLOTS - 1); t->cache[slot].hash; slot = (slot + 1) & (CACHE_SLOTS - 1)) {}
        }
        CacheSlot* e = &t->cache[slot];
        e->hash = h;
        e->key_off = t->cache_key_used;
        e->key_len = (uint16_t)m;
        e->tok_off = t->cache_tok_used;
        e->ntok = (uint16_t)k_out;
        memcpy(t->cache_keys + t->cache_key_used, s, m);
        memcpy(t->cache_toks + t->cache_tok_used, o, k_out * sizeof(int));
        t->cache_key_used += (uint32_t)m;
        t->cache_tok_used += (uint32_t)k_out;
        t->cache_entries++;
    }
    return n + k_out;
}

static size_t encode_plain(Tokenizer* t, const unsigned char* s, size_t len, int** out, size_t n, size_t* cap) {
    size_t i = 0;
    while (i < len) {
        size_t j = piece_end(s, len, i);
        n = encode_piece(t, s + i, j - i, out, n, cap);
        i = j;
    }
    return n;
}

size_t tokenizer_encode_append(const Tokenizer* tc, const char* text, size_t len, int allow_special,
                               int** out, size_t* n, size_t* cap) {
    Tokenizer* t = (Tokenizer*)tc;  // only the cache and scratch change: see "Not thread-safe"
    const unsigned char* s = (const unsigned char*)text;
    size_t count = *n;
    if (allow_special && t->eot >= 0) {
        const size_t sl = sizeof(GPT2_EOT_TEXT) - 1;
        for (;;) {
            const unsigned char* hit = (const unsigned char*)memmem(s, len, GPT2_EOT_TEXT, sl);
            if (!hit) break;
            count = encode_plain(t, s, (size_t)(hit - s), out, count, cap);
            out_reserve(out, cap, count + 1);
            (*out)[count++] = t->eot;
            len -= (size_t)(hit - s) + sl;
            s = hit + sl;
        }
    }
    count = encode_plain(t, s, len, out, count, cap);
    *n = count;
    return count;
}

size_t tokenizer_encode(const Tokenizer* t, const char* text, size_t len, int allow_special, int** out, size_t* cap) {
    size_t n = 0;
    return tokenizer_encode_append(t, text, len, allow_special, out, &n, cap);
}

// ---------------------------------------------------------------------------------------------
// UTF-8 printer

void utf8_printer_init(Utf8Printer* p) { memset(p, 0, sizeof(*p)); }

static const unsigned char replacement[3] = {0xEF, 0xBF, 0xBD};  // U+FFFD

void utf8_printer_put(Utf8Printer* p, FILE* f, const unsigned char* bytes, size_t n) {
    unsigned char buf[512];
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (used > sizeof(buf) - 8) { fwrite(buf, 1, used, f); used = 0; }
        unsigned b = bytes[i];
        if (p->have > 0) {
            unsigned lo = 0x80, hi = 0xBF;
            if (p->have == 1) {
                unsigned lead = p->pending[0];
                if (lead == 0xE0) lo = 0xA0;
                if (lead == 0xED) hi = 0x9F;
                if (lead == 0xF0) lo = 0x90;
                if (lead == 0xF4) hi = 0x8F;
            }
            if (b >= lo && b <= hi) {
                p->pending[p->have++] = (unsigned char)b;
                if (p->have == p->need) {
                    memcpy(buf + used, p->pending, (size_t)p->have);
                    used += (size_t)p->have;
                    p->have = p->need = 0;
                }
                continue;
            }
            // The held sequence is broken: one U+FFFD for it, then b starts afresh.
            memcpy(buf + used, replacement, 3);
            used += 3;
            p->have = p->need = 0;
        }
        if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7F) {  // its control picture, U+2400 + b (DEL: U+2421)
            buf[used++] = 0xE2;
            buf[used++] = 0x90;
            buf[used++] = (unsigned char)(b == 0x7F ? 0xA1 : 0x80 + b);
            continue;
        }
        if (b < 0x80) { buf[used++] = (unsigned char)b; continue; }
        int need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
        if (need == 0) { memcpy(buf + used, replacement, 3); used += 3; continue; }
        p->pending[0] = (unsigned char)b;
        p->have = 1;
        p->need = need;
    }
    if (used) fwrite(buf, 1, used, f);
}

void utf8_printer_flush(Utf8Printer* p, FILE* f) {
    if (p->have > 0) fwrite(replacement, 1, 3, f);
    p->have = p->need = 0;
    fflush(f);
}
