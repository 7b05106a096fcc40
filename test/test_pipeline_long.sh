#!/usr/bin/env bash
# test_pipeline_long.sh: test_pipeline.sh's longer cases (make test-long): -pp 2 x 2 data-parallel
# ranks at -z 0, -pp 4 on 4 ranks, --pp-split 3,1 at -r 3, and FP16 (see test_pipeline.sh).
PP_LONG=1 exec bash "$(dirname "$0")/test_pipeline.sh"
