// export_hf.c: a model file (this project's or llm.c's, fp32 or bf16) as a directory that Hugging
// Face's GPT-2 (transformers' GPT2LMHeadModel.from_pretrained) loads: config.json and
// model.safetensors, both written here.
//
//   build/export_hf MODEL.bin OUTDIR
//
// safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data. Hugging Face's GPT-2 keeps its linear weights as Conv1D,
// shaped (in, out): ours (out, in) are written transposed. wte's padding rows are left out (the LM
// head is tied to wte); LayerNorm epsilon 1e-5 and the tanh GELU ("gelu_new") are GPT-2's, as here.
// Both files are written to temporary names and renamed, so a failed export leaves no half file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "gpt2_config.h"
#include "util.h"

typedef struct {
    char name[96];
    const float* src;  // ours, row-major
    size_t rows, cols; // ours: rows x cols
    int transpose;     // written as cols x rows
} Export;

static size_t export_add(Export* ex, size_t n, const char* name, const float* src, size_t rows, size_t cols, int transpose) {
    snprintf(ex[n].name, sizeof(ex[n].name), "%s", name);
    ex[n].src = src;
    ex[n].rows = rows;
    ex[n].cols = cols;
    ex[n].transpose = transpose;
    return n + 1;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.bin OUTDIR   (writes OUTDIR/config.json and OUTDIR/model.safetensors)\n", argv[0]);
        return 1;
    }
    const char *path = argv[1], *out = argv[2];
    GPT2Config cfg;
    model_file_check(path, &cfg);  // header, size, checksum when it has one, every value finite
    ParamLayout layout = gpt2_param_layout(&cfg);
    float* p = (float*)malloc_check(layout.num_parameters * sizeof(float), "parameters");
    model_file_read_params(path, &cfg, p);
    size_t L = (size_t)cfg.num_layers, C = (size_t)cfg.channels, V = (size_t)cfg.vocab_size;
    const ParamTensor* T = layout.tensors;
#define AT(i) (p + T[i].offset)

    // Hugging Face's names, in its module order.
    size_t max_tensors = 4 + 12 * L + 2, n = 0;
    Export* ex = (Export*)malloc_check(max_tensors * sizeof(Export), "tensor list");
    n = export_add(ex, n, "transformer.wte.weight", AT(PT_WTE), V, C, 0);
    n = export_add(ex, n, "transformer.wpe.weight", AT(PT_WPE), (size_t)cfg.max_seq_len, C, 0);
    for (size_t l = 0; l < L; l++) {
        char pre[64], name[96];
        snprintf(pre, sizeof(pre), "transformer.h.%zu.", l);
#define ADD(suffix, tensor, rows, cols, tr)                                                                  \
    do {                                                                                                     \
        snprintf(name, sizeof(name), "%s%s", pre, suffix);                                                   \
        n = export_add(ex, n, name, AT(tensor) + l * (size_t)(rows) * (cols), rows, cols, tr);               \
    } while (0)
        ADD("ln_1.weight", PT_LN1W, 1, C, 0);
        ADD("ln_1.bias", PT_LN1B, 1, C, 0);
        ADD("attn.c_attn.weight", PT_QKVW, 3 * C, C, 1);
        ADD("attn.c_attn.bias", PT_QKVB, 1, 3 * C, 0);
        ADD("attn.c_proj.weight", PT_ATTPROJW, C, C, 1);
        ADD("attn.c_proj.bias", PT_ATTPROJB, 1, C, 0);
        ADD("ln_2.weight", PT_LN2W, 1, C, 0);
        ADD("ln_2.bias", PT_LN2B, 1, C, 0);
        ADD("mlp.c_fc.weight", PT_FCW, 4 * C, C, 1);
        ADD("mlp.c_fc.bias", PT_FCB, 1, 4 * C, 0);
        ADD("mlp.c_proj.weight", PT_FCPROJW, C, 4 * C, 1);
        ADD("mlp.c_proj.bias", PT_FCPROJB, 1, C, 0);
#undef ADD
    }
    n = export_add(ex, n, "transformer.ln_f.weight", AT(PT_LNFW), 1, C, 0);
    n = export_add(ex, n, "transformer.ln_f.bias", AT(PT_LNFB), 1, C, 0);

    // The header: shapes as Hugging Face's (vectors 1-D, Conv1D weights in x out), byte ranges in order.
    size_t cap = 256 + n * 200, used = 0, offset = 0;
    char* header = (char*)malloc_check(cap, "safetensors header");
    used += (size_t)snprintf(header + used, cap - used, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < n; i++) {
        size_t bytes = ex[i].rows * ex[i].cols * sizeof(float);
        size_t d0 = ex[i].transpose ? ex[i].cols : ex[i].rows, d1 = ex[i].transpose ? ex[i].rows : ex[i].cols;
        if (ex[i].rows == 1)
            used += (size_t)snprintf(header + used, cap - used, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}",
                                     ex[i].name, d1, offset, offset + bytes);
        else
            used += (size_t)snprintf(header + used, cap - used,
                                     ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":[%zu,%zu]}", ex[i].name,
                                     d0, d1, offset, offset + bytes);
        offset += bytes;
    }
    used += (size_t)snprintf(header + used, cap - used, "}");
    while (used % 8) header[used++] = ' ';  // the data starts 8-byte aligned

    make_dirs(out);
    char st_path[4200], cfg_path[4200], tmp[4300];
    snprintf(st_path, sizeof(st_path), "%s/model.safetensors", out);
    snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", out);
    FILE* f = atomic_open(st_path, tmp, sizeof(tmp));
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((unsigned long long)used >> (8 * b));
    fwrite_check(len8, 1, 8, f, tmp);
    fwrite_check(header, 1, used, f, tmp);
    size_t widest = 4 * C > V ? 4 * C : V;
    float* col = (float*)malloc_check(widest * sizeof(float), "export buffer");
    for (size_t i = 0; i < n; i++) {
        const Export* e = &ex[i];
        if (!e->transpose) {
            fwrite_check(e->src, sizeof(float), e->rows * e->cols, f, tmp);
            continue;
        }
        for (size_t c = 0; c < e->cols; c++) {  // row c of the transpose: column c of ours
            for (size_t r = 0; r < e->rows; r++) col[r] = e->src[r * e->cols + c];
            fwrite_check(col, sizeof(float), e->rows, f, tmp);
        }
    }
    atomic_close(f, tmp, st_path);

    f = atomic_open(cfg_path, tmp, sizeof(tmp));
    fprintf(f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": %d,\n"
            "  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n"
            "  \"n_inner\": null,\n  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n  \"initializer_range\": 0.02,\n"
            "  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n  \"bos_token_id\": %d,\n"
            "  \"eos_token_id\": %d,\n  \"torch_dtype\": \"float32\"\n}\n",
            cfg.vocab_size, cfg.max_seq_len, cfg.max_seq_len, cfg.channels, cfg.num_layers, cfg.num_heads,
            GPT2_EOT < cfg.vocab_size ? GPT2_EOT : cfg.vocab_size - 1, GPT2_EOT < cfg.vocab_size ? GPT2_EOT : cfg.vocab_size - 1);
    atomic_close(f, tmp, cfg_path);
    printf("export_hf: %s (L=%d C=%d NH=%d V=%d maxT=%d, %zu tensors) -> %s and %s\n", path, cfg.num_layers, cfg.channels,
           cfg.num_heads, cfg.vocab_size, cfg.max_seq_len, n, cfg_path, st_path);
    free(col); free(header); free(ex); free(p);
    return 0;
}
