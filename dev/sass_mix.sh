#!/usr/bin/env bash
# sass_mix.sh (make sass-mix): the SASS instruction mix of every kernel of the trainer, sm_90a, in one
# precision: train_gpt2.cu compiled to a cubin, disassembled with nvdisasm, and counted per kernel by
# dev/sass_mix.py (tensor-core MMAs: HMMA, and HGMMA, wgmma's; ldmatrix, shared and global loads and
# stores by width, cp.async, generic loads, barriers, MUFU, shuffles, atomics, local memory), and each
# kernel's hot loop (the kernel report charges the flash kernels its instructions per tensor
# instruction times the tensor instructions the CPU runtime counted). Static counts: instructions in
# the code, not how often they run.
# sm_90a, not sm_90: an H100 runs the flash kernels' wgmma path only from sm_90a code (compiled for
# plain sm_90 those kernels hold a trap). sm_90a is a superset: every other kernel's SASS is the same,
# instruction for instruction, as an sm_90 compile's (label and internal function numbers aside;
# checked with this nvcc, CUDA 13.0). The part of the kernel
# report that needs a disassembler; its result for FP16 is committed as docs/sass_mix_fp16.md and .json,
# which the kernel report reads when no disassembler is there.
#
# CUDA 13's toolkit has no nvdisasm. An older one reads these cubins once three ELF header fields of a
# copy are set to what it knows (this script does it when the first try is refused; CUDA 11.8 knows no
# sm_90a, so the copy says sm_90, whose instruction set it decodes, HGMMA included); CUDA 11.8's comes
# in Debian's nvidia-cuda-toolkit (bookworm, component non-free). To fetch it without touching the
# system's apt configuration (docs/speed.md says the same):
#   mkdir -p ~/nvd/lists/partial && echo 'deb http://deb.debian.org/debian bookworm non-free' > ~/nvd/sources.list
#   O="-o Dir::Etc::sourcelist=$HOME/nvd/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$HOME/nvd/lists"
#   apt-get $O update && (cd ~/nvd && apt-get $O download nvidia-cuda-toolkit) && dpkg-deb -x ~/nvd/nvidia-cuda-toolkit_*.deb ~/nvd/x
#   NVDISASM=~/nvd/x/usr/bin/nvdisasm make sass-mix
# Output: build/dev/sass/train_gpt2_PREC.md (the table) and .json.
#   bash dev/sass_mix.sh [fp16|bf16|fp32]
set -u
cd "$(dirname "$0")/.."
p=${1:-fp16}
case $p in fp16 | bf16 | fp32) ;; *) echo "sass_mix: precision must be fp16, bf16 or fp32, got '$p'"; exit 1 ;; esac
P=$(echo "$p" | tr a-z A-Z)
cuda=${CUDA_HOME:-/usr/local/cuda}
nvdisasm=${NVDISASM:-$(command -v nvdisasm || echo "$cuda/bin/nvdisasm")}
if [ ! -x "$nvdisasm" ]; then
    echo "sass_mix: no nvdisasm (NVDISASM, PATH, $cuda/bin): CUDA 13 ships none; see this script's header for"
    echo "  an older one from Debian's non-free component. Without it the kernel report has everything but the"
    echo "  instruction mix (registers, shared memory, counted bytes and FLOPs, predicted times)."
    exit 1
fi
nvcc=$(command -v nvcc || echo "$cuda/bin/nvcc")
[ -x "$nvcc" ] || { echo "sass_mix: no nvcc ($cuda/bin/nvcc)"; exit 1; }
out=build/dev/sass
mkdir -p "$out"
cubin=$out/train_gpt2_$p.cubin
echo "sass_mix: nvcc -cubin -arch=sm_90a -DENABLE_$P train_gpt2.cu"
"$nvcc" -cubin -arch=sm_90a -O3 -std=c++17 -Icommon -Ireference -Ikernels -DENABLE_$P train_gpt2.cu -o "$cubin.tmp" ||
    { echo "sass_mix: nvcc failed"; rm -f "$cubin.tmp"; exit 1; }
mv "$cubin.tmp" "$cubin"
sass=$out/train_gpt2_$p.sass
if ! "$nvdisasm" -c "$cubin" > "$sass.tmp" 2> "$out/nvdisasm.err"; then
    # An older nvdisasm refuses a newer cubin by its ELF header alone: OS ABI (byte 7) 0x41 -> 0x33,
    # ABI version (byte 8) 8 -> 7, e_flags (offset 0x30, sm_90a's) -> sm_90 as CUDA 11.8 writes it.
    python3 - "$cubin" "$cubin.old" << 'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[7], b[8] = 0x33, 7
b[0x30:0x34] = bytes([0x5A, 0x05, 0x5A, 0x00])
open(sys.argv[2], "wb").write(b)
EOF
    "$nvdisasm" -c "$cubin.old" > "$sass.tmp" 2>> "$out/nvdisasm.err" ||
        { echo "sass_mix: $nvdisasm cannot read the cubin, even with its header rewritten: $(head -n 2 "$out/nvdisasm.err")"; rm -f "$sass.tmp"; exit 1; }
    echo "sass_mix: $("$nvdisasm" --version | tail -n 1) read the cubin with its ELF header rewritten for it"
fi
mv "$sass.tmp" "$sass"
{
    echo "# SASS instruction mix, sm_90a, $P: static counts (each instruction in the code once)"
    echo
    echo "train_gpt2.cu compiled by $("$nvcc" --version | tail -n 1), disassembled by $("$nvdisasm" --version | tail -n 1)"
    echo "(dev/sass_mix.sh). \`.128\` columns: the 128-bit subset of the column before; LD/ST: generic"
    echo "(the compiler could not tell shared from global); LDL/STL: local memory; HGMMA: wgmma (the flash kernels'"
    echo "sm_90a path), once a warp; hot loop: the backward-branch range with the most tensor instructions, HMMA +"
    echo "HGMMA (dev/sass_mix.py)."
    echo
    python3 dev/sass_mix.py "$sass" --json "$out/train_gpt2_$p.json"
} > "$out/train_gpt2_$p.md" || exit 1
cat "$out/train_gpt2_$p.md"
