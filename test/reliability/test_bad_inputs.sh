#!/usr/bin/env bash
# test_bad_inputs.sh: the generated corpus of bad files and flags (bad_inputs.py) against the
# programs that read them: each ends with one "error:" line naming the file or flag and a status
# of 1..127, or (for a mutation that is still a valid file) runs cleanly; none crashes or hangs.
set -u
. "$(dirname "$0")/../lib.sh"
python3 test/reliability/bad_inputs.py . "$dir"
