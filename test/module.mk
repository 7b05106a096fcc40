# test/module.mk: the C engine's tests (parity with PyTorch, gradients, accumulation, resume,
# bad input) and their helper programs.

TEST_BIN = $(BUILD)/test

$(TEST_BIN)/parity_dump: $(BUILD)/test/parity_dump.o $(HOST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(TEST_BIN)/test_engine: $(BUILD)/test/test_engine.o $(HOST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

TESTS += test/test_parity.sh $(TEST_BIN)/test_engine test/test_trainer.sh
# The data order whatever the split of a step's batch (ranks x micro-steps x B): the same losses on
# the C engine and on the emulated GPU trainer under mpirun, resumes on another split and from the
# state format before (about 15 s of CPU).
TESTS += test/test_data_order.sh
# llm.c's flags with llm.c's meaning (-h, -k and its schedules, -y 1, DONE files, -nk/-nm), and
# docs/flags.md against --help.
TESTS += test/test_llmc_flags.sh test/test_flags_doc.sh
# What a reader of the tree meets: no tracker issue named in any file (test_no_tracker.sh), and the
# modules of common/, reference/ and kernels/ including each other in one direction (test_includes.sh),
# and the places that once repeated themselves written once (test_repetition.sh).
TESTS += test/test_no_tracker.sh test/test_includes.sh test/test_repetition.sh
# They read the tree and run no program built here: nothing for the sanitizers.
TESTS_SAN_SKIP += test/test_no_tracker.sh test/test_includes.sh test/test_repetition.sh
# -y 1 resumes llm.c's checkpoints (state_STEP_RANK.bin), written by an independent Python writer.
# (make test-long: about 20 s of CPU, which make test's 6 minutes no longer had room for.)
TESTS_LONG += test/test_llmc_resume.sh
# main.log in llm.c's format, and scripts/plot_log.py.
TESTS += test/test_logs.sh
# -h 1: HellaSwag in llm.c's format, against PyTorch (about 37 s of CPU: the sanitizer pass, where its
# reader meets the files it writes).
TESTS_SAN_LONG += test/test_hellaswag.sh
# build/export_hf: a Hugging Face GPT-2 directory, read back independently.
TESTS += test/test_export_hf.sh
# A descriptor model starts as llm.c's (PyTorch's generator), and llm.c's descriptors (about 25 s of
# CPU, most of it d6 checkpoints written and read: the sanitizer pass).
TESTS_SAN_LONG += test/test_llmc_init.sh
# llm.c's run_gpt2_124M.sh and run_gpt2_1558M.sh command lines (shrunk) in llm.c's restart loop; the
# 1558M line on the emulated GPU engine (about a minute of CPU: make test-long).
TESTS_LONG += test/test_llmc_scripts.sh
ifneq ($(CUDA_CPU_HAVE_CUDA),)
TEST_LONG_DEPS += $(BUILD)/emu/train_gpt2_emu_fp32
endif
TEST_DEPS += $(TEST_BIN)/parity_dump

$(TEST_BIN)/test_dataloader: $(BUILD)/test/test_dataloader.o $(BUILD)/common/dataloader.o $(BUILD)/common/util.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
TESTS += $(TEST_BIN)/test_dataloader

$(TEST_BIN)/test_host: $(BUILD)/test/test_host.o $(BUILD)/common/sampler.o $(BUILD)/common/gpu_peak.o $(BUILD)/common/engine.o \
	$(BUILD)/common/util.o $(BUILD)/common/dynlib.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) -ldl
TESTS += $(TEST_BIN)/test_host
# The nvcc-built trainer loads the CUDA driver, cuBLASLt and NCCL when its GPU engine starts, not at
# process start: ldd, --help, each library missing in turn (copies of the binary with a soname
# patched, the toolkit's stub driver), NCCL on 2 ranks under mpirun; SKIP for the C-only build.
TESTS += test/test_cuda_libs.sh
# The build notices a change of its configuration (MPI, CUDA, flags) and rebuilds what depends on it
# (about 16 s of CPU in builds of its own: make test-long).
TESTS_LONG += test/test_build_config.sh
# `make vocab` never breaks a resume (6-step runs on the built-in corpus).
TESTS += test/test_vocab_resume.sh
# The built-in run with one more flag (-x 3, -b 8, -e d4 ...): the preset fills the rest, and trains.
TESTS += test/test_builtin_flags.sh
# README's commands one after another in one working dir: the built-in run's out, out-2, ... (C
# engine, the emulated GPU trainer, 2 ranks under mpirun), and -y 1 finding the first run.
TESTS += test/test_run_dirs.sh
# The no-argument run, its whole epoch (a few minutes on 2 cores); make test's built-in runs are
# test_builtin_flags.sh's, a few steps each.
TESTS_LONG += test/test_default_run.sh
# The memory ladder (planned) and the run recipes' --dry: ./train_gpt2 --plan only (test_ladder.sh;
# about 24 s of CPU, the sanitizer pass; the planner's own checks in make test are test_defects.sh's
# limits and suggestions, and test_doc_figures.sh's figures from the ladder).
TESTS_SAN_LONG += test/test_ladder.sh
# The planner's step time against the kernel report's (one time model, two readers): ./train_gpt2
# --plan --gpu against docs/kernel_report_fp16.json's side-by-side and planner configurations (a few
# seconds).
TESTS += test/test_time_model.sh

# gen_data: model files of any shape and learnable token shards, without Python (the GPU check
# script runs it on bare machines too).
$(TEST_BIN)/gen_data: $(BUILD)/test/gen_data.o $(HOST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
TEST_DEPS += $(TEST_BIN)/gen_data

# The GPU engine through the contract and end to end, on the CPU runtime, in each precision: FP16 in
# make test, FP32 and BF16 in make test-long (the emulated trainers of all three run in make test's
# scripts).
ifneq ($(CUDA_CPU_HAVE_CUDA),)
$(foreach p,$(EMU_PRECISIONS),$(eval $(call cuda_cpu_program,$(TEST_BIN)/test_gpu_engine_$(p),test/test_gpu_engine.cu,\
	. kernels common reference test,$(HOST_LIB),$(call precision_define,$(p)) $(EMU_NCCL))))
TESTS += $(TEST_BIN)/test_gpu_engine_fp16 test/test_emu.sh
TESTS_LONG += $(TEST_BIN)/test_gpu_engine_fp32 $(TEST_BIN)/test_gpu_engine_bf16
TEST_DEPS += $(EMU_BINS)
# The memory planner against the engine's allocations, --max-memory, out of memory, --offload
# (about 2 minutes of CPU: make test-long).
TESTS_LONG += test/test_memory_plan.sh
# The trainer's stream synchronization: each event wait and record of the ZeRO, offload and pipeline
# code removed in turn, and the runtime stops the run naming the missing order (about 80 s of CPU:
# make test-long). In make test, the runtime's checker is test_bugs's and test_patterns's, and every
# ZeRO, offload and pipeline run there (test_launch.sh, test_pipeline.sh, test_emu.sh) goes through it.
TESTS_LONG += test/test_stream_sync.sh test/test_stream_sync_pipe.sh
endif

# The GPU engine over ranks: mpirun -np 2 and 3 through the runtime's NCCL over MPI (test_zero.sh).
ifneq ($(CUDA_CPU_HAVE_CUDA),)
ifneq ($(CUDA_CPU_HAVE_MPI),)
$(foreach p,fp32 fp16,$(eval $(call cuda_cpu_program,$(TEST_BIN)/test_zero_$(p),test/test_zero.cu,\
	. kernels common reference test,$(HOST_LIB),$(call precision_define,$(p)) $(EMU_NCCL))))
# About 2 minutes of CPU: make test-long, which alone builds its programs.
TESTS_LONG += test/test_zero.sh
TEST_LONG_DEPS += $(TEST_BIN)/test_zero_fp32 $(TEST_BIN)/test_zero_fp16
# ZeRO-3 over 2 and 3 ranks: the same programs on stage 3 (recompute levels, accumulation, overflow,
# checkpoints), the trainer against one process, resumes on 1-3 ranks (about 4 minutes of CPU).
TESTS_LONG += test/test_zero3.sh
# The communication volume of each ZeRO stage, counted by the runtime's NCCL (NCCL_CPU_TRAFFIC),
# against its closed form (test_comm_volume.sh; about 90 s of wall time on 2 cores, so make test-long;
# the emulated trainer and gen_data are deps above).
TESTS_LONG += test/test_comm_volume.sh
# Stages 0 and 1 reducing beside backward (the default) against --overlap 0: the same bits, 2 ranks
# (test_zero_overlap.sh; about 40 s of CPU, 90 s of wall time beside another test: make test-long,
# with test_zero.sh).
TESTS_LONG += test/test_zero_overlap.sh
# Ranks without mpirun: -pi tcp|fs and Slurm's variables, 2 processes equal to mpirun's run; bad
# input, a rank killed mid-run (test_launch.sh; about 25 s of CPU).
TESTS += test/test_launch.sh
endif
# Pipeline stages (-pp): bad input, then -pp 2 on 2 ranks and x 2 data-parallel ranks against one
# process, checkpoints across -pp (test_pipeline.sh; about 30 s of CPU); -z 0, -pp 4 and FP16 in
# make test-long (test_pipeline_long.sh). Without MPI the bad-input part runs alone.
TESTS += test/test_pipeline.sh
TESTS_LONG += test/test_pipeline_long.sh
endif

# The figures README.md and docs/ quote from the project's tools (the planner, the ladder, a
# recipe's --dry), marked in the Markdown: each is what its tool prints now, and marked where it
# belongs (scripts/doc_figures.py; make docs rewrites them). Not in the sanitizer pass: it reads
# the docs, and the planner's runs under the sanitizers are test_defects.sh's and test_ladder.sh's.
TESTS += test/test_doc_figures.sh
TESTS_SAN_SKIP += test/test_doc_figures.sh
.PHONY: docs
docs: train_gpt2
	@$(PYTHON) scripts/doc_figures.py --write
