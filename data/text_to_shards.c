// text_to_shards.c: text files to token shards for training (shard format in
// common/dataloader.h), encoded with GPT-2's tokenizer or at byte level.
//
// The input (files in order, or standard input) is cut into documents by --split; each
// document becomes <|endoftext|> (50256) followed by its tokens, as in GPT-2's training data
// and llm.c. Empty documents are skipped. The token stream goes to two splits:
//   --val-tokens N   the first N tokens are validation, the rest training (llm.c's rule; a
//                    document may straddle the cut)
//   --val-every K    instead: documents K-1, 2K-1, ... (a fraction 1/K, whole documents) are
//                    validation
// Each split is written as shards of --shard-tokens tokens (the last one shorter):
// PREFIX_val_000000.bin, PREFIX_val_000001.bin, ... and PREFIX_train_000001.bin, ... Shards of
// an earlier run under the same prefix that this run did not rewrite are removed, so a glob
// never mixes two runs. The whole set is written under temporary names first and renamed only
// when every shard is written: a failure (a bad input, a full disk) leaves the earlier set as it
// was, and the temporary files of a killed run are removed by the next run on that prefix.
//
// Split rules (a line's ending, "\n" or "\r\n", is not part of what it is compared with):
//   file    each input file is one document (the default)
//   line    each line is one document, without its line ending
//   blank   documents are separated by empty lines
//   delim   documents are separated by lines equal to --delim TEXT (default "%": fortune files)
// For blank and delim, a document is its lines with their line endings, less the last line's;
// the end of each input file also ends a document.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "dataloader.h"
#include "tokenizer.h"
#include "util.h"

// ---------------------------------------------------------------------------------------------
// Flags: one table for both the parser and the usage text.

typedef struct {
    const char* name;
    char short_name;
    const char* arg;  // NULL for a switch
    const char* help;
} Flag;

static const Flag FLAGS[] = {
    {"out", 'o', "PREFIX", "output prefix (default data/cache/shards/text): PREFIX_val_000000.bin, PREFIX_train_000001.bin, ..."},
    {"tokenizer", 't', "PATH", "tokenizer file (default data/vocab/gpt2_bpe.bin, made by `make vocab`)"},
    {"bytes", 'b', NULL, "byte-level tokens (ids 0..255; 50256 before each document): no tokenizer file"},
    {"split", 's', "RULE", "how documents are cut: file (default), line, blank or delim"},
    {"delim", 'd', "TEXT", "the separator line for --split delim (default %)"},
    {"val-tokens", 0, "N", "the first N tokens are the validation split (default 32768)"},
    {"val-every", 0, "K", "instead, every K-th document (whole) is validation"},
    {"shard-tokens", 'n', "N", "tokens per shard (default 100000000)"},
    {"allow-special", 0, NULL, "\"<|endoftext|>\" in the text becomes token 50256 (default: encoded as text)"},
    {"quiet", 'q', NULL, "no progress lines"},
    {"help", 'h', NULL, "print this help"},
};
#define NFLAGS (int)(sizeof(FLAGS) / sizeof(FLAGS[0]))

static void usage(FILE* f) {
    fprintf(f, "usage: text_to_shards [options] [FILE ...]   (no FILE, or -, reads standard input)\n"
               "Encodes text into token shards; each document starts with <|endoftext|>.\n");
    for (int i = 0; i < NFLAGS; i++) {
        char left[64];
        snprintf(left, sizeof(left), "%c%c%s--%s%s%s", FLAGS[i].short_name ? '-' : ' ',
                 FLAGS[i].short_name ? FLAGS[i].short_name : ' ', FLAGS[i].short_name ? ", " : "  ", FLAGS[i].name,
                 FLAGS[i].arg ? " " : "", FLAGS[i].arg ? FLAGS[i].arg : "");
        fprintf(f, "  %-24s %s\n", left, FLAGS[i].help);
    }
}

static long long parse_count(const char* flag, const char* s, long long min) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min) fatal("--%s expects an integer >= %lld, got '%s'", flag, min, s);
    return v;
}

// ---------------------------------------------------------------------------------------------
// Splits and shards

typedef struct {
    const char* name;
    uint16_t* buf;
    size_t n, cap;
    int first_index, next_index;
    long long total;
} Split;

// A shard written under its temporary name, renamed into place at the end.
typedef struct {
    char tmp[4200], path[4200];
} Pending;

typedef struct {
    const char* prefix;
    Pending* pending;
    int npending, pending_cap;
    Tokenizer* tok;
    int allow_special, quiet, reported;
    long long val_tokens, val_every;
    Split val, train;
    int* ids;
    size_t ids_cap;
    long long docs, bytes_read;
    double t0, last_report;
} State;

static void split_flush(State* st, Split* s) {
    if (s->n == 0) return;
    if (s->next_index > 999999) fatal("more than 1000000 %s shards: raise --shard-tokens", s->name);
    if (st->npending == st->pending_cap) {
        st->pending_cap = st->pending_cap ? 2 * st->pending_cap : 16;
        st->pending = (Pending*)realloc(st->pending, (size_t)st->pending_cap * sizeof(Pending));
        if (!st->pending) fatal("out of host memory listing shards");
    }
    Pending* p = &st->pending[st->npending++];
    snprintf(p->path, sizeof(p->path), "%s_%s_%06d.bin", st->prefix, s->name, s->next_index++);
    FILE* f = atomic_open(p->path, p->tmp, sizeof(p->tmp));
    shard_write_stream(f, p->tmp, s->buf, s->n);
    atomic_finish(f, p->tmp);
    s->n = 0;
}

static void split_add(State* st, Split* s, const int* ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        s->buf[s->n++] = (uint16_t)ids[i];
        if (s->n == s->cap) split_flush(st, s);
    }
    s->total += (long long)n;
}

static void progress(State* st, int force) {
    double now = wall_time_ms();
    // Long inputs only: a line every 2 s, and a last one at the end if any came before.
    if (st->quiet || (force ? !st->reported : now - st->last_report < 2000)) return;
    st->last_report = now;
    st->reported = 1;
    double s = (now - st->t0) / 1e3;
    fprintf(stderr, "text_to_shards: %.1f MB read, %lld documents, %.2f M tokens, %.1f MB/s\n", st->bytes_read / 1e6,
            st->docs, (st->val.total + st->train.total) / 1e6, s > 0 ? st->bytes_read / 1e6 / s : 0.0);
}

static void emit_document(State* st, const char* text, size_t len) {
    if (len == 0) return;
    size_t n = 1;
    if (st->ids_cap == 0) {
        st->ids_cap = 1024;
        st->ids = (int*)malloc_check(st->ids_cap * sizeof(int), "document tokens");
    }
    st->ids[0] = GPT2_EOT;
    tokenizer_encode_append(st->tok, text, len, st->allow_special, &st->ids, &n, &st->ids_cap);
    if (st->val_every > 0) {
        int to_val = (st->docs + 1) % st->val_every == 0;
        split_add(st, to_val ? &st->val : &st->train, st->ids, n);
    } else {
        long long room = st->val_tokens - st->val.total;
        size_t k = room <= 0 ? 0 : (size_t)room < n ? (size_t)room : n;
        split_add(st, &st->val, st->ids, k);
        split_add(st, &st->train, st->ids + k, n - k);
    }
    st->docs++;
    progress(st, 0);
}

// ---------------------------------------------------------------------------------------------
// Reading documents

enum { SPLIT_FILE, SPLIT_LINE, SPLIT_BLANK, SPLIT_DELIM };

typedef struct {
    char* buf;
    size_t n, cap;
} Buf;

static void buf_put(Buf* b, const char* s, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 1 << 16;
        while (c < b->n + n) c *= 2;
        char* p = (char*)realloc(b->buf, c);
        if (!p) fatal("out of host memory holding a document of %zu bytes", b->n + n);
        b->buf = p;
        b->cap = c;
    }
    memcpy(b->buf + b->n, s, n);
    b->n += n;
}

// Ends the current document of a blank/delim split: drops its last line ending.
static void end_document(State* st, Buf* doc) {
    size_t n = doc->n;
    if (n > 0 && doc->buf[n - 1] == '\n') n--;
    if (n > 0 && doc->buf[n - 1] == '\r' && n < doc->n) n--;
    emit_document(st, doc->buf, n);
    doc->n = 0;
}

static void read_input(State* st, const char* path, int split, const char* delim, Buf* doc) {
    int is_stdin = !strcmp(path, "-");
    errno = 0;
    FILE* f = is_stdin ? stdin : fopen_check(path, "rb");
    const char* name = is_stdin ? "standard input" : path;
    if (split == SPLIT_FILE) {
        char chunk[1 << 16];
        size_t got;
        while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
            buf_put(doc, chunk, got);
            st->bytes_read += (long long)got;
        }
        if (ferror(f)) fatal("cannot read %s", name);
        emit_document(st, doc->buf, doc->n);
        doc->n = 0;
    } else {
        char* line = NULL;
        size_t line_cap = 0;
        ssize_t len;
        size_t delim_len = strlen(delim);
        while ((len = getline(&line, &line_cap, f)) > 0) {
            st->bytes_read += len;
            size_t body = (size_t)len;
            if (body > 0 && line[body - 1] == '\n') body--;
            if (body > 0 && line[body - 1] == '\r' && body < (size_t)len) body--;
            if (split == SPLIT_LINE) {
                emit_document(st, line, body);
            } else if ((split == SPLIT_BLANK && body == 0) ||
                       (split == SPLIT_DELIM && body == delim_len && memcmp(line, delim, body) == 0)) {
                end_document(st, doc);
            } else {
                buf_put(doc, line, (size_t)len);
            }
        }
        // getline also returns -1 when a line does not fit in memory: that is no end of input.
        if (ferror(f) || !feof(f))
            fatal("cannot read %s (%s)", name, errno == ENOMEM ? "a line too long for memory" : strerror(errno));
        free(line);
        if (split != SPLIT_LINE) end_document(st, doc);
    }
    if (!is_stdin) fclose(f);
}

// The folder and the file-name start of a prefix: "a/b/text" -> "a/b" and "text".
static void prefix_split(const char* prefix, char* dir, size_t dir_cap, const char** base) {
    const char* slash = strrchr(prefix, '/');
    if (!slash) snprintf(dir, dir_cap, ".");
    else if (slash == prefix) snprintf(dir, dir_cap, "/");
    else snprintf(dir, dir_cap, "%.*s", (int)(slash - prefix), prefix);
    *base = slash ? slash + 1 : prefix;
}

// Removes BASE_name_NNNNNN.bin files outside [first, next): leftovers of an earlier run. The
// names are compared as plain text in the prefix's own folder (no glob: a prefix may hold '*').
static int remove_stale(const char* prefix, const Split* s) {
    char dir[4200], want[4300];
    const char* base;
    prefix_split(prefix, dir, sizeof(dir), &base);
    int wlen = snprintf(want, sizeof(want), "%s_%s_", base, s->name);
    DIR* d = opendir(dir);
    if (!d) fatal("cannot list folder %s (%s)", dir, strerror(errno));
    int removed = 0;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        const char* name = ent->d_name;
        if (strncmp(name, want, (size_t)wlen) != 0 || strlen(name) != (size_t)wlen + 10 || strcmp(name + wlen + 6, ".bin"))
            continue;
        int idx = 0, digits = 1;
        for (int k = 0; k < 6; k++) {
            char c = name[wlen + k];
            digits &= c >= '0' && c <= '9';
            idx = idx * 10 + (c - '0');
        }
        if (!digits || (idx >= s->first_index && idx < s->next_index)) continue;
        char path[8600];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (remove(path) != 0) fatal("cannot remove stale shard %s (%s)", path, strerror(errno));
        removed++;
    }
    closedir(d);
    return removed;
}

int main(int argc, char** argv) {
    const char* prefix = "data/cache/shards/text";
    const char* tok_path = NULL;
    const char* delim = "%";
    const char* split_name = "file";
    int bytes = 0, allow_special = 0, quiet = 0, have_val_tokens = 0;
    long long val_tokens = 32768, val_every = 0, shard_tokens = 100000000;
    const char** inputs = (const char**)malloc_check((size_t)argc * sizeof(char*), "input list");
    int ninputs = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (a[0] != '-' || !strcmp(a, "-")) { inputs[ninputs++] = a; continue; }
        const Flag* fl = NULL;
        for (int k = 0; k < NFLAGS && !fl; k++) {
            if ((a[1] == '-' && !strcmp(a + 2, FLAGS[k].name)) || (a[1] && a[1] == FLAGS[k].short_name && !a[2]))
                fl = &FLAGS[k];
        }
        if (!fl) fatal("unknown option %s (try --help)", a);
        const char* v = NULL;
        if (fl->arg) {
            if (i + 1 >= argc) fatal("--%s needs a value (%s)", fl->name, fl->arg);
            v = argv[++i];
        }
        if (!strcmp(fl->name, "out")) prefix = v;
        else if (!strcmp(fl->name, "tokenizer")) tok_path = v;
        else if (!strcmp(fl->name, "bytes")) bytes = 1;
        else if (!strcmp(fl->name, "split")) split_name = v;
        else if (!strcmp(fl->name, "delim")) delim = v;
        else if (!strcmp(fl->name, "val-tokens")) { val_tokens = parse_count(fl->name, v, 0); have_val_tokens = 1; }
        else if (!strcmp(fl->name, "val-every")) val_every = parse_count(fl->name, v, 1);
        else if (!strcmp(fl->name, "shard-tokens")) shard_tokens = parse_count(fl->name, v, 1);
        else if (!strcmp(fl->name, "allow-special")) allow_special = 1;
        else if (!strcmp(fl->name, "quiet")) quiet = 1;
        else { usage(stdout); return 0; }
    }
    int split;
    if (!strcmp(split_name, "file")) split = SPLIT_FILE;
    else if (!strcmp(split_name, "line")) split = SPLIT_LINE;
    else if (!strcmp(split_name, "blank")) split = SPLIT_BLANK;
    else if (!strcmp(split_name, "delim")) split = SPLIT_DELIM;
    else fatal("--split expects file, line, blank or delim, got '%s'", split_name);
    if (bytes && tok_path) fatal("--bytes and --tokenizer exclude each other");
    if (have_val_tokens && val_every) fatal("--val-tokens and --val-every exclude each other");
    if (shard_tokens > INT32_MAX) fatal("--shard-tokens expects at most %d (the shard format's limit)", INT32_MAX);
    if (ninputs == 0) inputs[ninputs++] = "-";
    int stdin_uses = 0;
    for (int i = 0; i < ninputs; i++) {
        if (!strcmp(inputs[i], "-")) stdin_uses++;
        else if (!file_exists(inputs[i])) fatal("input file %s does not exist", inputs[i]);
        else if (path_not_regular(inputs[i]))
            fatal("input file %s is %s, expected a regular file (pipe a stream in as -)", inputs[i], path_not_regular(inputs[i]));
    }
    if (stdin_uses > 1) fatal("standard input (-) can be read only once");

    State st;
    memset(&st, 0, sizeof(st));
    st.prefix = prefix;
    if (!bytes && !tok_path && !file_exists(tokenizer_default_path()))
        fatal("tokenizer file %s is missing: run `make vocab`, or pass --bytes for byte-level tokens", tokenizer_default_path());
    st.tok = bytes ? tokenizer_bytes_only() : tokenizer_load(tok_path ? tok_path : tokenizer_default_path());
    st.allow_special = allow_special;
    st.quiet = quiet;
    st.val_tokens = val_every ? 0 : val_tokens;
    st.val_every = val_every;
    Split* splits[2] = {&st.val, &st.train};
    st.val.name = "val";
    st.train.name = "train";
    st.val.first_index = st.val.next_index = 0;
    st.train.first_index = st.train.next_index = 1;
    for (int k = 0; k < 2; k++) {
        // A buffer as large as the tokens this split can hold, at most one shard.
        long long most = (splits[k] == &st.val && !val_every) ? (val_tokens < shard_tokens ? val_tokens : shard_tokens) : shard_tokens;
        splits[k]->cap = most > 0 ? (size_t)most : 1;
        splits[k]->buf = (uint16_t*)malloc_check(splits[k]->cap * sizeof(uint16_t), "shard buffer");
    }
    if (prefix[0] == '\0' || prefix[strlen(prefix) - 1] == '/') fatal("--out expects a prefix ending in a file name, got '%s'", prefix);
    char dir[4200];
    const char* base;
    prefix_split(prefix, dir, sizeof(dir), &base);
    make_dirs(dir);
    char tmp_start[4300];
    snprintf(tmp_start, sizeof(tmp_start), "%s_", base);
    long long stale_bytes;
    int stale_tmp = remove_temp_files(dir, tmp_start, 1, &stale_bytes);
    if (stale_tmp && !quiet)
        fprintf(stderr, "text_to_shards: removed %d temporary file%s of an interrupted run (%.1f MB)\n", stale_tmp,
                stale_tmp == 1 ? "" : "s", stale_bytes / 1e6);

    st.t0 = st.last_report = wall_time_ms();
    Buf doc = {NULL, 0, 0};
    for (int i = 0; i < ninputs; i++) read_input(&st, inputs[i], split, delim, &doc);
    for (int k = 0; k < 2; k++) split_flush(&st, splits[k]);
    if (st.docs == 0)
        fatal("no text in %s%s (every document was empty)", strcmp(inputs[0], "-") ? inputs[0] : "standard input",
              ninputs > 1 ? " and the other inputs" : "");
    if (st.train.total == 0)
        fatal("no tokens left for training: all %lld went to validation (lower --val-tokens, or use --val-every)", st.val.total);
    // Every shard is on disk: now they take their names, the set at once (as near as renames allow).
    for (int i = 0; i < st.npending; i++) atomic_commit(st.pending[i].tmp, st.pending[i].path);
    int stale = remove_stale(prefix, &st.val) + remove_stale(prefix, &st.train);
    progress(&st, 1);
    double secs = (wall_time_ms() - st.t0) / 1e3;
    printf("%s: %lld documents, %.2f MB in %.1f s -> %lld val tokens in %d shard%s, %lld train tokens in %d shard%s (%s)\n",
           prefix, st.docs, st.bytes_read / 1e6, secs, st.val.total, st.val.next_index - st.val.first_index,
           st.val.next_index - st.val.first_index == 1 ? "" : "s", st.train.total, st.train.next_index - st.train.first_index,
           st.train.next_index - st.train.first_index == 1 ? "" : "s", bytes ? "byte-level" : "GPT-2 BPE");
    if (stale) printf("removed %d shard%s of an earlier run under %s\n", stale, stale == 1 ? "" : "s", prefix);
    free(doc.buf); free(st.ids); free(st.val.buf); free(st.train.buf); free(inputs); free(st.pending);
    tokenizer_free(st.tok);
    return 0;
}
