// train_loop.h: the training driver every engine shares: flags, data, the step loop, validation,
// sampling, logging and checkpoints. An engine (engine.h) only does the arithmetic; main()
// chooses it between train_setup and train_run:
//
//   TrainSetup s;
//   train_setup(&s, argc, argv, PRECISION_FP16);  // the GPU engine's precision, for --plan
//   Engine* e = engine_select(s.opts.engine, gpu_create, cpu_create, &s.config, &s.engine_options);
//   return train_run(&s, e);
#ifndef COMMON_TRAIN_LOOP_H
#define COMMON_TRAIN_LOOP_H

#include "engine.h"
#include "train_setup.h"

#ifdef __cplusplus
extern "C" {
#endif

// Flags, the model's shape, the output dir (locked for this run), the data (every token checked),
// the checkpoint to resume from and the engine options; fatal (one line naming the flag or file)
// on anything wrong, before an engine is made. gpu_precision: the GPU build's (FP16 where there is
// none), what --plan plans and the engine options ask for unless --precision says otherwise. With
// --plan, prints the memory plan and exits.
void train_setup(TrainSetup* s, int argc, char** argv, Precision gpu_precision);
// Set by a main() that can ask (the GPU build's): this machine's GPU's name, or NULL when it has none.
// --plan predicts the step's time on that GPU when --gpu names none.
extern const char* (*train_device_name)(void);
// The run: weights (fresh, from -e, or resumed), then the step loop. Destroys e; returns the
// exit status: 0, or 128 + the signal when a stop request (SIGINT, SIGTERM, SIGUSR1, SIGUSR2)
// ended it with a checkpoint (0 with several ranks: see stop_status in train_loop.c).
int train_run(TrainSetup* s, Engine* e);

#ifdef __cplusplus
}
#endif
#endif
