// hellaswag.c: llm.c's multiple-choice eval file and its accuracy (see hellaswag.h).
#include "hellaswag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "util.h"

#define HEADER_INTS 256
#define DELIMITER 65535

// Checks example i at word `at` of n and returns the word after it; fatal naming the file and the
// example on anything llm.c's reader would assert on, or that does not fit in T tokens or V ids.
static size_t example_check(const HellaSwag* h, const uint16_t* w, size_t at, size_t n, int i, int T, int V) {
    const char* p = h->path;
    if (n - at < 6) fatal("HellaSwag file %s: example %d is cut off at the end of the file", p, i);
    if (w[at] != DELIMITER)
        fatal("HellaSwag file %s: example %d does not start with the delimiter 65535 (found %d)", p, i, w[at]);
    size_t words = w[at + 1] / 2;
    if (w[at + 1] % 2 || words < 6 || words > n - at)
        fatal("HellaSwag file %s: example %d says it is %d bytes, which %s", p, i, w[at + 1],
              words > n - at ? "runs past the end of the file" : "cannot hold an example");
    if (w[at + 2] != i % 65536) fatal("HellaSwag file %s: example %d carries the index %d", p, i, w[at + 2]);
    int label = w[at + 3], completions = w[at + 4], ctx = w[at + 5];
    if (label >= HELLASWAG_COMPLETIONS)
        fatal("HellaSwag file %s: example %d has label %d, expected 0 to %d", p, i, label, HELLASWAG_COMPLETIONS - 1);
    if (completions != HELLASWAG_COMPLETIONS)
        fatal("HellaSwag file %s: example %d has %d completions, expected %d (llm.c's format)", p, i, completions,
              HELLASWAG_COMPLETIONS);
    size_t end = at + words, k = at + 6;
    if (ctx == 0 || k + (size_t)ctx > end)
        fatal("HellaSwag file %s: example %d has a context of %d tokens, which does not fit the example", p, i, ctx);
    for (int c = -1; c < completions; c++) {
        // c = -1: the context; then each completion, its length first.
        int len = ctx;
        if (c >= 0) {
            len = k < end ? w[k++] : 0;
            if (len == 0 || k + (size_t)len > end)
                fatal("HellaSwag file %s: example %d, completion %d has %d tokens, which do not fit the example", p, i, c, len);
            if (ctx + len > T)
                fatal("HellaSwag file %s: example %d, context and completion %d are %d tokens, more than -t %d (flag -t)",
                      p, i, c, ctx + len, T);
        }
        for (int t = 0; t < len; t++, k++)
            if (w[k] >= V)
                fatal("HellaSwag file %s: example %d holds token %d, out of range for the model's vocabulary of %d", p,
                      i, w[k], V);
    }
    if (k != end) fatal("HellaSwag file %s: example %d says it is %d bytes but its tokens take %zu", p, i, w[at + 1], 2 * (k - at));
    return end;
}

void hellaswag_open(HellaSwag* h, const char* path, int B, int T, int vocab_size, int rank, int num_ranks) {
    memset(h, 0, sizeof(*h));
    snprintf(h->path, sizeof(h->path), "%s", path);
    if (B < HELLASWAG_COMPLETIONS)
        fatal("flag -h 1: HellaSwag puts an example's %d completions in %d rows of a batch; -b is %d (flag -b)",
              HELLASWAG_COMPLETIONS, HELLASWAG_COMPLETIONS, B);
    const char* kind = path_not_regular(path);
    if (kind) fatal("HellaSwag file %s is %s, expected a regular file", path, kind);
    if (!file_exists(path))
        fatal("flag -h 1: no HellaSwag file %s (make it with data/hellaswag.sh, or give llm.c's with --hellaswag-file)", path);
    FILE* f = fopen_check(path, "rb");
    long size = file_size(f, path);
    int32_t header[HEADER_INTS];
    if (size < (long)sizeof(header)) fatal("HellaSwag file %s is %ld bytes, less than its %zu-byte header", path, size, sizeof(header));
    fread_check(header, sizeof(int32_t), HEADER_INTS, f, path);
    if (header[0] != HELLASWAG_MAGIC) fatal("HellaSwag file %s has magic %d, expected %d", path, header[0], HELLASWAG_MAGIC);
    if (header[1] != 1) fatal("HellaSwag file %s has version %d, expected 1", path, header[1]);
    if (header[2] <= 0) fatal("HellaSwag file %s says it holds %d examples", path, header[2]);
    size_t bytes = (size_t)size - sizeof(header);
    if (bytes % 2) fatal("HellaSwag file %s is %ld bytes, not a whole number of uint16 tokens after its header", path, size);
    size_t n = bytes / 2;
    h->words = (uint16_t*)malloc_check(bytes ? bytes : 2, "HellaSwag file");
    fread_check(h->words, sizeof(uint16_t), n, f, path);
    fclose(f);
    h->num_examples = header[2];
    h->starts = (size_t*)malloc_check((size_t)h->num_examples * sizeof(size_t), "HellaSwag index");
    size_t at = 0;
    for (int i = 0; i < h->num_examples; i++) {
        h->starts[i] = at;
        at = example_check(h, h->words, at, n, i, T, vocab_size);
    }
    if (at != n)
        fatal("HellaSwag file %s: %zu bytes follow its %d examples (its header's count is wrong, or the file is damaged)", path,
              2 * (n - at), h->num_examples);
    // llm.c's split: ceil(examples / ranks) each, the last ranks maybe fewer or none.
    int per = (h->num_examples + num_ranks - 1) / num_ranks;
    h->first = per * rank < h->num_examples ? per * rank : h->num_examples;
    h->end = h->first + per < h->num_examples ? h->first + per : h->num_examples;
    h->B = B;
    h->T = T;
    size_t bt = (size_t)B * T;
    h->inputs = (int*)malloc_check(bt * sizeof(int), "HellaSwag batch");
    h->targets = (int*)malloc_check(bt * sizeof(int), "HellaSwag batch");
    h->mask = (unsigned char*)malloc_check(bt, "HellaSwag batch");
    h->losses = (float*)malloc_check(bt * sizeof(float), "HellaSwag batch");
    h->labels = (int*)malloc_check((size_t)(B / HELLASWAG_COMPLETIONS) * sizeof(int), "HellaSwag batch");
}

// Puts example i into rows [4 * slot, 4 * slot + 4): the context then completion c in row c; the
// targets are the next tokens, and the mask marks the positions that predict a completion token.
static void example_load(HellaSwag* h, int i, int slot) {
    const uint16_t* w = h->words + h->starts[i];
    int T = h->T, ctx = w[5];
    h->labels[slot] = w[3];
    const uint16_t* c = w + 6 + ctx;
    for (int r = 0; r < HELLASWAG_COMPLETIONS; r++) {
        int row = slot * HELLASWAG_COMPLETIONS + r, len = *c++;
        int* in = h->inputs + (size_t)row * T;
        int* tg = h->targets + (size_t)row * T;
        unsigned char* m = h->mask + (size_t)row * T;
        for (int t = 0; t < ctx; t++) in[t] = w[6 + t];
        for (int t = 0; t < len; t++) {
            in[ctx + t] = c[t];
            tg[ctx + t - 1] = c[t];
            m[ctx + t - 1] = 1;
        }
        c += len;
    }
}

int hellaswag_correct(HellaSwag* h, Engine* e) {
    int per_batch = h->B / HELLASWAG_COMPLETIONS, T = h->T;
    size_t bt = (size_t)h->B * T;
    int correct = 0;
    Progress progress;
    progress_begin(&progress, "HellaSwag", "examples", h->end - h->first);
    for (int i = h->first; i < h->end; i += per_batch) {
        // Unused positions read token 0 and are never scored (the causal model cannot see them
        // from a scored position).
        memset(h->inputs, 0, bt * sizeof(int));
        memset(h->targets, 0, bt * sizeof(int));
        memset(h->mask, 0, bt);
        int count = h->end - i < per_batch ? h->end - i : per_batch;
        for (int s = 0; s < count; s++) example_load(h, i + s, s);
        e->forward(e, h->inputs, h->targets, h->B, T);
        e->token_losses(e, h->losses);
        for (int s = 0; s < count; s++) {
            // The mean loss of each completion's tokens, summed in float in position order as llm.c does.
            float best = 0.0f;
            int best_c = -1;
            for (int c = 0; c < HELLASWAG_COMPLETIONS; c++) {
                size_t row = (size_t)(s * HELLASWAG_COMPLETIONS + c) * T;
                float sum = 0.0f;
                int n = 0;
                for (int t = 0; t < T; t++)
                    if (h->mask[row + t]) { sum += h->losses[row + t]; n++; }
                float mean = n ? sum / n : 0.0f;
                if (c == 0 || mean < best) { best = mean; best_c = c; }
            }
            correct += best_c == h->labels[s];
        }
        progress_update(&progress, i + count - h->first);
    }
    double total = correct;
    ranks_sum(&total, 1);
    return (int)(total + 0.5);
}

void hellaswag_free(HellaSwag* h) {
    free(h->words); free(h->starts); free(h->inputs); free(h->targets); free(h->mask); free(h->losses); free(h->labels);
    memset(h, 0, sizeof(*h));
}
