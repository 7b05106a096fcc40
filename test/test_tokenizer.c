// test_tokenizer.c: the tokenizer's own checks: byte tokens in GPT-2's order, bytes-only mode,
// decode(encode(x)) == x on random bytes (invalid UTF-8 included), special tokens, the encode
// buffer, and the UTF-8 printer. Exactness against the reference is test_tokenizer_exact.sh.
//
//   build/test_tokenizer [TOKENIZER_FILE]    without a file the full-vocabulary checks are skipped
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "test.h"
#include "tokenizer.h"
#include "unicode_tables.h"

// Bytes to test with: random bytes, or pieces of text that exercise the pattern (contractions,
// spaces, digits, multi-byte characters, long runs that take the heap path of BPE).
static size_t random_text(uint64_t* rng, unsigned char* buf, size_t cap) {
    static const char* parts[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", " ", "  ", "\t", "\n", "\r\n",
                                  "the", " the", "Hello", "123", " 45", "...", "!!", "é", "中文", "😀", "👨‍👩‍👧",
                                  "\xC2\xA0", "\xE3\x80\x80", "<|endoftext|>", "\xEF\xBB\xBF", "\xF0\x9F", "\xC3"};
    size_t n = 0, want = 1 + rng_below(rng, cap - 64);
    int mode = (int)rng_below(rng, 3);
    while (n < want) {
        if (mode == 0 || (mode == 2 && rng_below(rng, 2))) {
            buf[n++] = (unsigned char)rng_u32(rng);
        } else if (rng_below(rng, 40) == 0) {
            size_t run = 30 + rng_below(rng, 200);  // a long word: BPE on a heap
            unsigned char c = "aZ1!. "[rng_below(rng, 6)];
            for (size_t k = 0; k < run && n < cap - 1; k++) buf[n++] = rng_below(rng, 4) ? c : (unsigned char)('a' + rng_below(rng, 26));
        } else {
            const char* p = parts[rng_below(rng, sizeof(parts) / sizeof(parts[0]))];
            size_t l = strlen(p);
            if (n + l >= cap) break;
            memcpy(buf + n, p, l);
            n += l;
        }
    }
    return n;
}

// Decodes ids into out; returns the length, or (size_t)-1 if an id does not decode.
static size_t decode_all(const Tokenizer* t, const int* ids, size_t n, unsigned char* out, size_t cap) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const unsigned char* b = tokenizer_decode(t, ids[i], &l);
        if (!b || len + l > cap) return (size_t)-1;
        memcpy(out + len, b, l);
        len += l;
    }
    return len;
}

static void test_roundtrip(const Tokenizer* t, const char* name, int iters) {
    uint64_t rng = rng_seed(1234);
    unsigned char text[2048], back[4096];
    int* ids = NULL;
    size_t cap = 0;
    int fails = 0, out_of_range = 0;
    char why[256] = "";
    for (int it = 0; it < iters; it++) {
        size_t n = random_text(&rng, text, sizeof(text));
        for (int special = 0; special < 2; special++) {
            size_t k = tokenizer_encode(t, (const char*)text, n, special, &ids, &cap);
            for (size_t i = 0; i < k; i++)
                if (ids[i] < 0 || ids[i] >= tokenizer_vocab_size(t)) out_of_range++;
            size_t m = decode_all(t, ids, k, back, sizeof(back));
            if (m != n || memcmp(back, text, n) != 0) {
                if (!fails) snprintf(why, sizeof(why), "iteration %d (allow_special %d): %zu bytes in, %zu back", it, special, n, m);
                fails++;
            }
        }
    }
    char full[64];
    snprintf(full, sizeof(full), "%s_roundtrip_random_bytes", name);
    test_report(fails == 0, full, why);
    snprintf(full, sizeof(full), "%s_ids_in_range", name);
    test_report(out_of_range == 0, full, "an encoded id is outside the vocabulary");
    free(ids);
}

static void test_byte_order(void) {
    int seen[256] = {0}, perm = 1;
    for (int b = 0; b < 256; b++) {
        int id = tokenizer_byte_token((unsigned char)b);
        if (id < 0 || id > 255 || seen[id]++) perm = 0;
    }
    CHECK(perm, "byte_tokens_are_a_permutation");
    // Known GPT-2 ids: '!' 0, 'A' 32, space 220, newline 198, byte 0 188, 0xFF 187, soft hyphen 255.
    CHECK(tokenizer_byte_token('!') == 0 && tokenizer_byte_token('A') == 32 && tokenizer_byte_token(' ') == 220 &&
              tokenizer_byte_token('\n') == 198 && tokenizer_byte_token(0) == 188 &&
              tokenizer_byte_token(0xFF) == 187 && tokenizer_byte_token(0xAD) == 255,
          "byte_tokens_match_gpt2_ids");
}

static void test_bytes_only(void) {
    Tokenizer* t = tokenizer_bytes_only();
    CHECK(!tokenizer_can_merge(t), "bytes_only_cannot_merge");
    CHECK(tokenizer_vocab_size(t) == GPT2_VOCAB_SIZE && tokenizer_eot(t) == GPT2_EOT, "bytes_only_sizes");
    int* ids = NULL;
    size_t cap = 0;
    const char* s = "Hi <|endoftext|>\xFF";
    size_t n = tokenizer_encode(t, s, strlen(s), 0, &ids, &cap);
    int ok = n == strlen(s);
    for (size_t i = 0; ok && i < n; i++) ok = ids[i] == tokenizer_byte_token((unsigned char)s[i]);
    CHECK(ok, "bytes_only_one_token_per_byte");
    n = tokenizer_encode(t, s, strlen(s), 1, &ids, &cap);
    CHECK(n == 5 && ids[3] == GPT2_EOT && ids[4] == 187, "bytes_only_allow_special");
    size_t len;
    const unsigned char* b = tokenizer_decode(t, GPT2_EOT, &len);
    CHECK(b && len == 13 && memcmp(b, "<|endoftext|>", 13) == 0, "bytes_only_decodes_eot");
    CHECK(!tokenizer_decode(t, 256, &len) && len == 0 && !tokenizer_decode(t, -1, &len) &&
              !tokenizer_decode(t, GPT2_VOCAB_SIZE, &len),
          "bytes_only_decode_unknown_is_null");
    free(ids);
    test_roundtrip(t, "bytes_only", 300);
    tokenizer_free(t);
}

static void test_full(const Tokenizer* t) {
    CHECK(tokenizer_can_merge(t) && tokenizer_vocab_size(t) == GPT2_VOCAB_SIZE && tokenizer_eot(t) == GPT2_EOT,
          "full_sizes");
    int* ids = NULL;
    size_t cap = 0;
    // Facts about GPT-2 from its published vocabulary: "Hello world" is [15496, 995].
    size_t n = tokenizer_encode(t, "Hello world", 11, 0, &ids, &cap);
    CHECK(n == 2 && ids[0] == 15496 && ids[1] == 995, "full_hello_world");
    size_t len;
    const unsigned char* b = tokenizer_decode(t, 995, &len);
    CHECK(b && len == 6 && memcmp(b, " world", 6) == 0, "full_decode_token");
    CHECK(!tokenizer_decode(t, -1, &len) && !tokenizer_decode(t, GPT2_VOCAB_SIZE, &len), "full_decode_out_of_range_is_null");
    const char* s = "a<|endoftext|>b";
    n = tokenizer_encode(t, s, strlen(s), 1, &ids, &cap);
    CHECK(n == 3 && ids[1] == GPT2_EOT, "full_allow_special_eot");
    n = tokenizer_encode(t, s, strlen(s), 0, &ids, &cap);
    int has_eot = 0;
    for (size_t i = 0; i < n; i++) has_eot |= ids[i] == GPT2_EOT;
    CHECK(n > 3 && !has_eot, "full_special_is_text_by_default");
    // Appending keeps what is there; an empty text adds nothing.
    size_t m = 0;
    tokenizer_encode_append(t, "Hello", 5, 0, &ids, &m, &cap);
    tokenizer_encode_append(t, " world", 6, 0, &ids, &m, &cap);
    tokenizer_encode_append(t, "", 0, 0, &ids, &m, &cap);
    CHECK(m == 2 && ids[0] == 15496 && ids[1] == 995, "full_encode_append");
    // A buffer that starts empty grows.
    int* fresh = NULL;
    size_t fresh_cap = 0;
    char big[20000];
    for (size_t i = 0; i < sizeof(big); i++) big[i] = "ab \n"[i % 4];
    n = tokenizer_encode(t, big, sizeof(big), 0, &fresh, &fresh_cap);
    CHECK(n > 0 && fresh_cap >= n, "full_buffer_grows");
    free(fresh);
    free(ids);
    test_roundtrip(t, "full", 1500);
}

// Prints bytes through a Utf8Printer, one put per chunk of `chunk` bytes; returns the output.
static char* print_through(const unsigned char* s, size_t n, size_t chunk, size_t* out_len) {
    char* buf = NULL;
    FILE* f = open_memstream(&buf, out_len);
    Utf8Printer p;
    utf8_printer_init(&p);
    for (size_t i = 0; i < n; i += chunk) utf8_printer_put(&p, f, s + i, i + chunk <= n ? chunk : n - i);
    utf8_printer_flush(&p, f);
    fclose(f);
    return buf;
}

// Strict UTF-8 validity (no overlongs, surrogates or code points above U+10FFFF).
static int valid_utf8(const unsigned char* s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            unsigned lo = 0x80, hi = 0xBF, d = s[i + k];
            if (k == 1 && c == 0xE0) lo = 0xA0;
            if (k == 1 && c == 0xED) hi = 0x9F;
            if (k == 1 && c == 0xF0) lo = 0x90;
            if (k == 1 && c == 0xF4) hi = 0x8F;
            if (d < lo || d > hi) return 0;
        }
        i += len;
    }
    return 1;
}

static void check_print(const char* name, const char* in, const char* expect) {
    size_t n = strlen(in);
    int ok = 1;
    char why[160] = "";
    for (size_t chunk = 1; chunk <= n + 1; chunk++) {
        size_t len;
        char* out = print_through((const unsigned char*)in, n, chunk, &len);
        if (len != strlen(expect) || memcmp(out, expect, len) != 0) {
            if (ok) snprintf(why, sizeof(why), "put in chunks of %zu bytes gave %zu bytes, expected %zu", chunk, len, strlen(expect));
            ok = 0;
        }
        free(out);
    }
    test_report(ok, name, why);
}

#define FFFD "\xEF\xBF\xBD"

static void test_printer(void) {
    check_print("printer_ascii", "hello\n", "hello\n");
    check_print("printer_multibyte_split", "h\xC3\xA9llo \xE4\xB8\xAD \xF0\x9F\x98\x80", "h\xC3\xA9llo \xE4\xB8\xAD \xF0\x9F\x98\x80");
    check_print("printer_invalid_byte", "a\xFF" "b", "a" FFFD "b");
    check_print("printer_truncated_then_ascii", "\xE2\x82" "a", FFFD "a");
    check_print("printer_truncated_at_end", "ok\xF0\x9F\x98", "ok" FFFD);
    check_print("printer_overlong", "\xC0\xAF", FFFD FFFD);
    check_print("printer_surrogate", "\xED\xA0\x80", FFFD FFFD FFFD);
    check_print("printer_above_max", "\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD);
    check_print("printer_lone_continuation", "\x80\xBF", FFFD FFFD);
    check_print("printer_lead_then_lead", "\xC3\xC3\xA9", FFFD "\xC3\xA9");
    // Control characters (ESC's colour code, CR, DEL) as their pictures: ␆ ␛ ␍ ␡; newline and tab as they are.
    check_print("printer_control_pictures", "a\x06" "b\x1b[31m\tc\r\x7f\n", "a\xE2\x90\x86" "b\xE2\x90\x9B[31m\tc\xE2\x90\x8D\xE2\x90\xA1\n");

    // Random bytes: the output is always valid UTF-8 with no control character but newline and tab,
    // the same however the input is cut, and valid input without such controls comes out unchanged.
    uint64_t rng = rng_seed(99);
    unsigned char in[300];
    int valid = 1, same = 1, identity = 1, no_controls = 1;
    for (int it = 0; it < 2000; it++) {
        size_t n = random_text(&rng, in, sizeof(in));
        size_t l1, l2;
        char* a = print_through(in, n, n ? n : 1, &l1);
        char* b = print_through(in, n, 1 + rng_below(&rng, 5), &l2);
        if (!valid_utf8((unsigned char*)a, l1)) valid = 0;
        if (l1 != l2 || memcmp(a, b, l1) != 0) same = 0;
        int controls_in = 0;
        for (size_t i = 0; i < n; i++) controls_in |= (in[i] < 0x20 && in[i] != '\n' && in[i] != '\t') || in[i] == 0x7F;
        for (size_t i = 0; i < l1; i++)
            if (((unsigned char)a[i] < 0x20 && a[i] != '\n' && a[i] != '\t') || a[i] == 0x7F) no_controls = 0;
        if (valid_utf8(in, n) && !controls_in && (l1 != n || memcmp(a, in, n) != 0)) identity = 0;
        free(a); free(b);
    }
    CHECK(valid, "printer_output_is_valid_utf8");
    CHECK(no_controls, "printer_output_has_no_control_characters_but_newline_and_tab");
    CHECK(same, "printer_chunking_does_not_matter");
    CHECK(identity, "printer_valid_input_unchanged");
}

static void test_classes(void) {
    CHECK(tokenizer_codepoint_class('a') == UCLASS_LETTER && tokenizer_codepoint_class(0x4E2D) == UCLASS_LETTER &&
              tokenizer_codepoint_class('7') == UCLASS_NUMBER && tokenizer_codepoint_class(0x0663) == UCLASS_NUMBER &&
              tokenizer_codepoint_class(0x00BD) == UCLASS_NUMBER && tokenizer_codepoint_class(' ') == UCLASS_SPACE &&
              tokenizer_codepoint_class(0x3000) == UCLASS_SPACE && tokenizer_codepoint_class(0xFEFF) == UCLASS_SPACE &&
              tokenizer_codepoint_class(0x85) == UCLASS_OTHER && tokenizer_codepoint_class('!') == UCLASS_OTHER &&
              tokenizer_codepoint_class(0x1F600) == UCLASS_OTHER && tokenizer_codepoint_class(0x10FFFF) == UCLASS_OTHER,
          "codepoint_classes_spot_checks");
}

int main(int argc, char** argv) {
    test_byte_order();
    test_classes();
    test_bytes_only();
    test_printer();
    if (argc > 1 && argv[1][0]) {
        Tokenizer* t = tokenizer_load(argv[1]);
        test_full(t);
        tokenizer_free(t);
    } else {
        printf("SKIP full_vocabulary: %s\n", argc > 2 ? argv[2] : "no tokenizer file given (run make vocab)");
    }
    return test_finish();
}
