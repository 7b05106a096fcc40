// llmc_c_steps.c: llm.c's CPU trainer (train_gpt2.c, from the checkout at LLMC_DIR, included whole)
// stepped the way dev/runtime_corpus.sh steps llm.c's CUDA trainer through the CPU runtime, so their
// losses can be compared step by step. train_gpt2.c's own main() has fixed file names and 40 steps;
// this one takes the files, B, T and the step count, and does what train_gpt2.cu does at -l LR -c 0
// with its constant schedule: AdamW (betas 0.9 and 0.95, its fixed ones, eps 1e-8, no weight decay) after scaling the gradients
// to a norm of at most 1.0 (train_gpt2.cu's fixed gradient clipping; train_gpt2.c has none).
//   llmc_c_steps MODEL.bin TOKENS.bin B T STEPS LR
#define main llmc_train_gpt2_c_main
#include "train_gpt2.c"
#undef main

int main(int argc, char** argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: llmc_c_steps MODEL.bin TOKENS.bin B T STEPS LR\n");
        return 1;
    }
    int B = atoi(argv[3]), T = atoi(argv[4]), steps = atoi(argv[5]);
    float lr = (float)atof(argv[6]);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, argv[1]);
    DataLoader loader;
    dataloader_init(&loader, argv[2], B, T, 0, 1, 1);  // shuffled, as train_gpt2.cu's training loader
    for (int step = 1; step <= steps; step++) {
        dataloader_next_batch(&loader);
        gpt2_forward(&model, loader.inputs, loader.targets, B, T);
        gpt2_zero_grad(&model);
        gpt2_backward(&model);
        double sum_sq = 0.0;
        for (size_t i = 0; i < model.num_parameters; i++) sum_sq += (double)model.grads_memory[i] * model.grads_memory[i];
        float norm = (float)sqrt(sum_sq);
        if (norm > 1.0f) {
            float scale = 1.0f / norm;
            for (size_t i = 0; i < model.num_parameters; i++) model.grads_memory[i] *= scale;
        }
        gpt2_update(&model, lr, 0.9f, 0.95f, 1e-8f, 0.0f, step);
        printf("step %d loss %.6f norm %.4f\n", step, model.mean_loss, norm);
    }
    dataloader_free(&loader);
    gpt2_free(&model);
    return 0;
}
