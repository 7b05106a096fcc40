// corpus.c: the built-in corpus: a seeded story grammar, tokenized into shards (see corpus.h).
#include "corpus.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dataloader.h"
#include "gpt2_config.h"
#include "rng.h"
#include "tokenizer.h"
#include "util.h"

#define CORPUS_DOCS 1000
#define CORPUS_VAL_DOCS 50
#define CORPUS_SEED 20241130ull
#define CORPUS_VERSION 2  // bump when the corpus changes (grammar, size, split), so old caches are not reused
#define CORPUS_DIR "data/cache/builtin"

#define PICK(rng, arr) (arr[rng_below(rng, sizeof(arr) / sizeof(arr[0]))])

static const char* NAMES[] = {"Anna", "Ben", "Clara", "David", "Emma", "Finn", "Grace", "Henry", "Iris", "Jack",
                              "Lily", "Max", "Nora", "Oscar", "Rosa", "Sam", "Tom", "Vera", "Will", "Zoe"};
static const char* ANIMALS[] = {"cat", "dog", "fox", "owl", "horse", "rabbit", "duck", "goat", "mouse", "bird"};
static const char* PLACES[] = {"the river", "the forest", "the market", "the old mill", "the hill", "the garden",
                               "the harbor", "the village", "the school", "the bridge", "the farm", "the lake"};
static const char* OBJECTS[] = {"a red ball", "a small boat", "a blue kite", "an old map", "a wooden box",
                                "a silver key", "a loaf of bread", "a green hat", "a basket of apples", "a lantern"};
static const char* ADJECTIVES[] = {"happy", "tired", "curious", "brave", "quiet", "hungry", "cheerful", "sleepy"};
static const char* TIMES[] = {"In the morning", "At noon", "In the evening", "One cold day", "One sunny day",
                              "Late at night", "After lunch", "Before dinner"};
static const char* WEATHER[] = {"The sun was warm", "It began to rain", "The wind was strong", "Snow fell softly",
                                "The sky was clear", "Fog covered the fields"};
static const char* NUMBERS[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"};

typedef struct {
    char* buf;
    size_t len, cap;
} Text;

static void text_printf(Text* t, const char* fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) fatal("corpus: formatting failed");
        if (t->len + (size_t)n + 1 < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 64;
        t->buf = (char*)realloc(t->buf, t->cap);
        if (!t->buf) fatal("out of host memory generating the built-in corpus");
    }
}

// One story: a character, a companion animal, a trip, a find, and some counting.
static void story(Text* t, uint64_t* r) {
    const char* name = PICK(r, NAMES);
    const char* friend_name = PICK(r, NAMES);
    while (friend_name == name) friend_name = PICK(r, NAMES);
    const char* animal = PICK(r, ANIMALS);
    const char* place = PICK(r, PLACES);
    const char* object = PICK(r, OBJECTS);
    text_printf(t, "%s, %s went to %s with a %s %s. ", PICK(r, TIMES), name, place, PICK(r, ADJECTIVES), animal);
    text_printf(t, "%s. ", PICK(r, WEATHER));
    int sentences = 3 + (int)rng_below(r, 5);
    for (int i = 0; i < sentences; i++) {
        switch (rng_below(r, 7)) {
            case 0: text_printf(t, "At %s, %s found %s. ", place, name, object); break;
            case 1: text_printf(t, "The %s was %s, so %s gave it %s. ", animal, PICK(r, ADJECTIVES), name, object); break;
            case 2: text_printf(t, "%s met %s near %s. ", name, friend_name, PICK(r, PLACES)); break;
            case 3: text_printf(t, "\"Look at %s!\" said %s. ", object, friend_name); break;
            case 4: {
                int n = 2 + (int)rng_below(r, 8);
                text_printf(t, "%s counted the birds: ", name);
                for (int k = 0; k < n; k++) text_printf(t, "%s%s", NUMBERS[k], k + 1 < n ? ", " : ". ");
                break;
            }
            case 5: text_printf(t, "%s and the %s walked home from %s. ", name, animal, place); break;
            default: text_printf(t, "%s felt %s. ", name, PICK(r, ADJECTIVES)); break;
        }
    }
    text_printf(t, "The end.\n");
}

char* corpus_generate(size_t num_docs, unsigned long long seed, size_t* len_out) {
    Text t = {NULL, 0, 0};
    t.cap = num_docs * 512 + 64;
    t.buf = (char*)malloc_check(t.cap, "built-in corpus");
    uint64_t r = rng_seed(seed);
    for (size_t d = 0; d < num_docs; d++) {
        story(&t, &r);
        t.buf[t.len++] = '\0';  // document separator; text_printf always leaves room for it
    }
    *len_out = t.len;
    return t.buf;
}

// Encodes documents [d0, d1) with <|endoftext|> before each, like llm.c's data scripts.
static uint16_t* corpus_encode(const Tokenizer* tok, const char* text, size_t len, size_t d0, size_t d1, size_t* n_out) {
    int* ids = NULL;
    size_t cap = 0, n = 0, doc = 0;
    uint16_t* out = NULL;
    size_t out_n = 0, out_cap = 0;
    for (size_t pos = 0; pos < len; doc++) {
        size_t dlen = strlen(text + pos);
        if (doc >= d0 && doc < d1) {
            n = tokenizer_encode(tok, text + pos, dlen, 0, &ids, &cap);
            if (out_n + n + 1 > out_cap) {
                out_cap = (out_n + n + 1) * 2;
                out = (uint16_t*)realloc(out, out_cap * sizeof(uint16_t));
                if (!out) fatal("out of host memory tokenizing the built-in corpus");
            }
            out[out_n++] = GPT2_EOT;
            for (size_t i = 0; i < n; i++) out[out_n++] = (uint16_t)ids[i];
        }
        pos += dlen + 1;
    }
    free(ids);
    *n_out = out_n;
    return out;
}

// The checksum of a whole file's bytes (the tokenizer that built a cache).
static uint64_t file_checksum(const char* path) {
    FILE* f = fopen_check(path, "rb");
    Checksum sum;
    checksum_init(&sum);
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0) checksum_update(&sum, buf, got);
    if (ferror(f)) fatal("cannot read tokenizer file %s", path);
    fclose(f);
    return checksum_final(&sum);
}

// The cache's names say what built it: the corpus version and the tokenizer (none, or the checksum
// of its file), so shards made with another tokenizer file are never taken for these.
void corpus_default_kind(const char* tokenizer_path, char* kind, size_t cap) {
    if (tokenizer_path && tokenizer_path[0] && file_exists(tokenizer_path))
        snprintf(kind, cap, "v%d_gpt2-%016llx", CORPUS_VERSION, (unsigned long long)file_checksum(tokenizer_path));
    else
        snprintf(kind, cap, "v%d_bytes", CORPUS_VERSION);
}

void corpus_prepare_kind(CorpusPaths* paths, const char* kind, const char* tokenizer_path) {
    const char* dir = CORPUS_DIR;
    int version = 0, used = 0;
    if (sscanf(kind, "v%d_%n", &version, &used) != 1 || used == 0 || strlen(kind) >= sizeof(paths->kind))
        fatal("built-in corpus: '%s' is not a corpus name (v<version>_bytes or v<version>_gpt2-<checksum>)", kind);
    const char* enc = kind + used;
    int bpe = strncmp(enc, "gpt2-", 5) == 0;
    if (!bpe && strcmp(enc, "bytes") != 0)
        fatal("built-in corpus: '%s' is not a corpus name (v<version>_bytes or v<version>_gpt2-<checksum>)", kind);
    snprintf(paths->kind, sizeof(paths->kind), "%s", kind);
    paths->byte_level = !bpe;
    snprintf(paths->train_pattern, sizeof(paths->train_pattern), "%s/%s_train_000000.bin", dir, kind);
    snprintf(paths->val_pattern, sizeof(paths->val_pattern), "%s/%s_val_000000.bin", dir, kind);
    if (!file_exists(paths->train_pattern) || !file_exists(paths->val_pattern)) {
        // Only this version's generator and the very tokenizer file named can make them again.
        if (version != CORPUS_VERSION)
            fatal("the built-in corpus %s (version %d of its generator; this program makes version %d) is not in %s: "
                  "it cannot be made again", kind, version, CORPUS_VERSION, dir);
        char have[64] = "";
        if (bpe) {
            corpus_default_kind(tokenizer_path, have, sizeof(have));
            if (strcmp(have, kind) != 0)
                fatal("the built-in corpus %s was encoded with a tokenizer file of checksum %s; %s %s, so it cannot be "
                      "made again (restore that file and pass it with -K, or start a new run in another -o)", kind, enc + 5, tokenizer_path,
                      file_exists(tokenizer_path) ? "has another checksum" : "does not exist");
        }
        make_dirs(dir);
        double t0 = wall_time_ms();
        Tokenizer* tok = bpe ? tokenizer_load(tokenizer_path) : tokenizer_bytes_only();
        size_t len, ntrain, nval;
        char* text = corpus_generate(CORPUS_DOCS, CORPUS_SEED, &len);
        uint16_t* val = corpus_encode(tok, text, len, 0, CORPUS_VAL_DOCS, &nval);
        uint16_t* train = corpus_encode(tok, text, len, CORPUS_VAL_DOCS, CORPUS_DOCS, &ntrain);
        shard_write(paths->val_pattern, val, nval);
        shard_write(paths->train_pattern, train, ntrain);
        free(text); free(val); free(train);
        tokenizer_free(tok);
        printf("data: made the built-in corpus %s in %.2f s\n", kind, (wall_time_ms() - t0) / 1e3);
    }
    size_t ntrain = shard_open(paths->train_pattern, NULL), nval = shard_open(paths->val_pattern, NULL);
    printf("data: the built-in corpus (generated stories, %d documents; %s tokens: %zu train, %zu val) in %s\n",
           CORPUS_DOCS, bpe ? "GPT-2 BPE" : "byte-level", ntrain, nval, dir);
}

void corpus_prepare(CorpusPaths* paths, const char* tokenizer_path) {
    char kind[64];
    corpus_default_kind(tokenizer_path, kind, sizeof(kind));
    corpus_prepare_kind(paths, kind, tokenizer_path);
}
