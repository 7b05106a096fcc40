// train_gpt2_cpu.c: main() of a trainer built without CUDA: the shared driver with the C
// reference engine alone. (train_gpt2.cu is the same driver with the GPU engine added.)
#include "train_loop.h"

int main(int argc, char** argv) { return train_main(argc, argv, NULL); }
