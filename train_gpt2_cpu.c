// train_gpt2_cpu.c: main() of the trainer built without CUDA: the shared driver with the C
// reference engine alone (train_gpt2.cu is the same main with the GPU engine added).
#include "gpt2_cpu.h"
#include "train_loop.h"

int main(int argc, char** argv) {
    TrainSetup s;
    train_setup(&s, argc, argv, PRECISION_FP16);  // --plan plans the GPU engine in its default precision
    Engine* e = engine_select(s.opts.engine, NULL, gpt2_cpu_engine_create, &s.config, &s.engine_options);
    return train_run(&s, e);
}
