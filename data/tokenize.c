// tokenize.c: the tokenizer from the command line: text to token ids, ids back to text, a speed
// figure, and the character-class table (for the tests that compare it with the reference).
//
//   build/tokenize [FILE]                 prints the ids of FILE (or stdin), space-separated
//   build/tokenize --decode [FILE]        reads whitespace-separated ids, writes their bytes (also
//                                         with llm.c's gpt2_tokenizer.bin as --tokenizer)
//   build/tokenize --bench N FILE         encodes FILE N times; prints MB/s and tokens/s
//   build/tokenize --nul [FILE]           input is NUL-separated texts: one line of ids per text
//   build/tokenize --classes              prints "first last class" for every run of code points
// Options: --tokenizer PATH (default data/vocab/gpt2_bpe.bin), --bytes (no file: byte
// tokens), --allow-special (<|endoftext|> in text is id 50256), --safe (decode through the UTF-8
// printer: broken sequences come out as U+FFFD).
#include <stdint.h>
#include <string.h>

#include "tokenizer.h"
#include "unicode_tables.h"
#include "util.h"

static unsigned char* read_input(const char* path, size_t* n) {
    FILE* f = path ? fopen_check(path, "rb") : stdin;
    size_t cap = 1 << 16, len = 0;
    unsigned char* buf = (unsigned char*)malloc_check(cap, "input");
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = (unsigned char*)realloc(buf, cap);
            if (!buf) fatal("out of host memory reading %s", path ? path : "standard input");
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) fatal("cannot read %s", path ? path : "standard input");
    if (path) fclose(f);
    *n = len;
    return buf;
}

static void usage(const char* prog) {
    fprintf(stderr,
            "usage: %s [--tokenizer PATH | --bytes] [--allow-special] [FILE]   text -> ids\n"
            "       %s --decode [--safe] [--tokenizer PATH | --bytes] [FILE]    ids -> text\n"
            "       %s --nul [--tokenizer PATH | --bytes] [FILE]              NUL-separated texts -> ids\n"
            "       %s --bench N [--tokenizer PATH] FILE                        encoding speed\n"
            "       %s --classes                                                character classes\n",
            prog, prog, prog, prog, prog);
    exit(1);
}

static void print_classes(void) {
    int cls = -1;
    uint32_t start = 0;
    for (uint32_t cp = 0; cp <= 0x110000; cp++) {
        int c = cp > 0x10FFFF ? -2 : (cp >= 0xD800 && cp <= 0xDFFF) ? UCLASS_OTHER : tokenizer_codepoint_class(cp);
        if (c != cls) {
            if (cls >= 0) printf("%u %u %d\n", start, cp - 1, cls);
            start = cp;
            cls = c;
        }
    }
    printf("unicode %s\n", UNICODE_TABLES_VERSION);
}

int main(int argc, char** argv) {
    const char* tok_path = NULL;
    const char* file = NULL;
    int bytes = 0, allow_special = 0, decode = 0, safe = 0, nul = 0;
    long bench = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "--tokenizer")) {
            if (++i >= argc) fatal("--tokenizer needs a file path");
            tok_path = argv[i];
        } else if (!strcmp(a, "--bytes")) bytes = 1;
        else if (!strcmp(a, "--allow-special")) allow_special = 1;
        else if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "--safe")) safe = 1;
        else if (!strcmp(a, "--nul")) nul = 1;
        else if (!strcmp(a, "--classes")) { print_classes(); return 0; }
        else if (!strcmp(a, "--bench")) {
            char* end;
            if (++i >= argc || (bench = strtol(argv[i], &end, 10)) <= 0 || *end)
                fatal("--bench needs a positive number of repetitions");
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(argv[0]);
        else if (a[0] == '-' && a[1]) fatal("unknown option %s (try --help)", a);
        else if (file) fatal("one input file at most (got %s and %s)", file, a);
        else file = a;
    }
    if (bytes && tok_path) fatal("--bytes and --tokenizer exclude each other");
    // Decoding also takes llm.c's tokenizer file (no merges: it cannot encode).
    const char* path = tok_path ? tok_path : tokenizer_default_path();
    Tokenizer* t = bytes ? tokenizer_bytes_only() : decode ? tokenizer_load_decoder(path) : tokenizer_load(path);
    size_t n;
    unsigned char* in = read_input(file && strcmp(file, "-") ? file : NULL, &n);

    if (decode) {
        Utf8Printer p;
        utf8_printer_init(&p);
        char* s = (char*)realloc(in, n + 1);
        if (!s) fatal("out of host memory");
        s[n] = 0;
        char* cur = s;
        for (;;) {
            while (*cur == ' ' || *cur == '\n' || *cur == '\t' || *cur == '\r') cur++;
            if (!*cur) break;
            char* end;
            long id = strtol(cur, &end, 10);
            if (end == cur) fatal("%s: expected a token id, found '%.10s'", file ? file : "standard input", cur);
            size_t len;
            const unsigned char* b = tokenizer_decode(t, (int)id, &len);
            if (!b || id != (int)id)
                fatal("token id %ld cannot be decoded (vocabulary of %d%s)", id, tokenizer_vocab_size(t),
                      tokenizer_can_merge(t) ? "" : ", byte-level: ids 0..255 and 50256");
            if (safe) utf8_printer_put(&p, stdout, b, len);
            else fwrite(b, 1, len, stdout);
            cur = end;
        }
        if (safe) utf8_printer_flush(&p, stdout);
        free(s);
        tokenizer_free(t);
        return 0;
    }

    int* ids = NULL;
    size_t cap = 0, count = 0;
    if (bench) {
        double best = 1e30;
        for (long r = 0; r < bench; r++) {
            // A fresh tokenizer each time: the word cache starts empty, as in a real run.
            Tokenizer* tb = bytes ? tokenizer_bytes_only() : tokenizer_load(tok_path ? tok_path : tokenizer_default_path());
            double t0 = wall_time_ms();
            count = tokenizer_encode(tb, (const char*)in, n, allow_special, &ids, &cap);
            double ms = wall_time_ms() - t0;
            if (ms < best) best = ms;
            tokenizer_free(tb);
        }
        printf("C tokenizer: %zu bytes -> %zu tokens in %.1f ms (best of %ld): %.2f MB/s, %.3f M tokens/s\n", n, count,
               best, bench, n / best / 1e3, count / best / 1e3);
    } else {
        // One text, or each NUL-separated text on its own (a trailing NUL ends the last text).
        size_t start = 0;
        while (start < n || (!nul && start == 0)) {
            size_t end = start;
            if (nul) while (end < n && in[end] != 0) end++;
            else end = n;
            count = tokenizer_encode(t, (const char*)in + start, end - start, allow_special, &ids, &cap);
            for (size_t i = 0; i < count; i++) printf(i ? " %d" : "%d", ids[i]);
            printf("\n");
            start = end + 1;
        }
    }
    free(ids);
    free(in);
    tokenizer_free(t);
    return 0;
}
