#!/usr/bin/env bash
# test_stream_sync_pipe.sh: test_stream_sync.sh's check of the pipeline's own synchronization
# (train_gpt2_pipe.cuh): every event record, stream wait and host synchronization there removed in
# turn, each run under mpirun on two stages expected to stop naming the missing order, or the send
# that then never meets its receive. A test of its own, in make test-long (test_stream_sync.sh, the
# ZeRO part, is in make test).
STREAM_SYNC_PART=pipe exec bash "$(dirname "$0")/test_stream_sync.sh"
