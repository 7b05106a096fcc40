#!/usr/bin/env bash
# test_nvcc_compile.sh: every .cu and .cuh of the project stays plain CUDA that nvcc compiles, for
# sm_80 (A100) and sm_90a (H100: sm_90 and its wgmma, which the flash kernels' Hopper path needs; a
# superset of sm_90), with its host code (compile only; nothing runs without a GPU): the runtime's own
# tests, every kernel test and the GPU engine's contract test in each precision, train_gpt2.cu itself,
# everything in dev/cuda, and each header of kernels/ and dev/cuda alone (a file that includes only
# it, so a header that forgets an include fails here).
#
# Each (file, architecture, defines) is compiled once, into a cache of its architecture that every
# use of it shares (make test's register table, this test, the trainer's build):
#   $out/sm90a  sm_90a device code alone (nvcc -cubin): ptxas's sm_90a resource use, no host pass;
#   $out/sm80   nvcc -c for sm_80: sm_80's device code and the host pass, the one host compile a file
#               and its defines get.
# The two check what one nvcc run for both architectures with -c checks, and together cost what it
# costs: that run too compiles the device code once per architecture and the host code once. The
# register table needs sm_90a's ptxas output alone, so make test's build skips the host pass (nvcc -c
# of kernels/test_matmul.cu for sm_90a took 3.2 s, -cubin 1.2 s), and make test-long's sm_80
# compile does it. A
# compile's NAME.log holds nvcc's output with ptxas's resource use (-Xptxas -v); NAME.KEY.ok marks
# its success. It is not redone while nothing it could read changed: the key covers the source,
# every project header (.h, .cuh), the defines, the architecture's flags and nvcc's version.
#
# Who compiles what, once in a CI run (make test, then make test-long):
#   - make's trainer build (make train) compiles train_gpt2.cu for sm_90a in its PRECISION with
#     -Xptxas -v, its output in build/train_gpt2.nvcc.log; `--reuse train_gpt2_FP16=LOG` (make passes
#     it, with NVCC naming the nvcc that wrote LOG) takes that log as the sm_90a result of
#     train_gpt2.cu in FP16. The trainer's other flags (-DUSE_NCCL, -O3 and the host compiler's flags)
#     change its host code only (compared once: its ptxas lines were this script's compile's, line for
#     line). LOG is taken only when it is newer than the source and every header
#     the key covers and comes from the same nvcc; else the file is compiled here like any other.
#   - --build [PRECISION...] (make runs it before the tests: make test asks for FP16, the precision of
#     its kernel tests; make test-long for FP32 FP16 BF16): the sm_90a device code of the files whose
#     kernels the CPU runtime launches (its tests, the kernel tests, the trainer, whose kernels are
#     the engine's test's too; not dev/cuda nor the header units), in the precisions given (default
#     all three), and
#     $out/registers.db: every kernel's mangled name with its sm_90a registers and stack frame over
#     those compiles, every precision whose compiles are current (the wgmma kernels' real ones:
#     compiled for plain sm_90 they hold a trap and a few registers), which the CPU runtime reads to
#     refuse a launch whose block a GPU could not give registers (test/cuda_cpu/README.md: "Launch
#     resources"). No test lines.
#   - the test (make test-long): sm_80 with host code of every file, and sm_90a's device code of what
#     is not cached yet (dev/cuda, the header units); a file passes when both compiled. ptxas's
#     resource use of every kernel of kernels/, per precision and architecture, goes to
#     $out/registers.txt (registers, spill stores and loads in bytes, stack frame), and the FP16 lines
#     are printed.
# Each run prints a line of what it compiled and what it reused.
set -u
cd "$(dirname "$0")/../.."
usage="test_nvcc_compile.sh [--build [FP32|FP16|BF16]...] [--reuse NAME=LOG]..."
build_only=0
asked=()
reuse=()  # NAME=LOG
while [ $# -gt 0 ]; do
    case $1 in
        --build) build_only=1 ;;
        --reuse)
            case ${2:-} in ?*=?*) reuse+=("$2"); shift ;; *) echo "$usage: --reuse takes NAME=LOG"; exit 2 ;; esac ;;
        FP32|FP16|BF16) asked+=("$1") ;;
        *) echo "$usage: --build takes FP32, FP16 or BF16, got '$1'"; exit 2 ;;
    esac
    shift
done
if [ ${#asked[@]} -gt 0 ] && [ $build_only = 0 ]; then echo "$usage: precisions are --build's"; exit 2; fi
precisions=${asked[*]:-FP32 FP16 BF16}
out=${CUDA_CPU_OUT:-build/cuda_cpu}/nvcc
mkdir -p "$out/headers" "$out/sm90a" "$out/sm80"
nvcc=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
if [ ! -x "$nvcc" ]; then
    if [ $build_only = 1 ]; then
        echo "# no nvcc at make time: no kernel's registers are known" > "$out/registers.db"
        exit 0
    fi
    echo "SKIP nvcc_compile: no nvcc (CUDA toolkit) on this machine"
    exit 0
fi
nvcc_version=$("$nvcc" --version | tail -n 1)
declare -A arch_flags=([sm90a]="-gencode arch=compute_90a,code=sm_90a -cubin" [sm80]="-gencode arch=compute_80,code=sm_80 -c")
declare -A arch_out=([sm90a]=cubin [sm80]=o)
declare -A arch_what=([sm90a]="sm_90a device code" [sm80]="sm_80 with host code")
mpi_flags=$(mpicxx -showme:compile 2>/dev/null || true)
# Everything a compile may include: one hash over all of it (a header edit recompiles all).
key_inputs=$(find kernels common reference test dev -name '*.h' -o -name '*.cuh' | sort; echo train_gpt2.cu cuda_libs.cuh train_gpt2_zero.cuh train_gpt2_pipe.cuh)
tree_key=$( (cat $key_inputs; echo "$nvcc_version") | sha1sum | cut -c1-16)

# A file per header that includes only it (rewritten only when its text changes, keeping the cache).
header_unit() {  # header path -> unit path
    local h=$1 unit="$out/headers/$(echo "$1" | tr '/.' '__').cu"
    local text="#include \"$h\""
    [ -f "$unit" ] && [ "$(cat "$unit")" = "$text" ] || echo "$text" > "$unit"
    echo "$unit"
}

# A compile's cache key: the whole tree's, its architecture's flags, its defines and its source.
# A header unit (a file that includes one header alone) checks that the header compiles by itself:
# includes, declarations, each architecture's code paths. nvcc's front end for each architecture does
# that; its kernels' machine code (ptxas) is compiled where the programs that use them are, so a
# header unit stops at PTX (kernels/attention.cuh's for sm_80: 23 s with ptxas, 14 s without; the 36
# header units' compiles: 102 s of CPU with ptxas, 87 s without).
declare -A header_flags=([sm90a]="-arch=compute_90a -ptx" [sm80]="-gencode arch=compute_80,code=compute_80 -c")
flags_for() {  # arch, name: nvcc's architecture flags for that compile
    case ${2:-} in header_*) echo "${header_flags[$1]}" ;; *) echo "${arch_flags[$1]}" ;; esac
}
compile_key() {  # arch, source, defines, name
    (echo "$tree_key $(flags_for "$1" "${4:-}") $3"; cat "$2") | sha1sum | cut -c1-16
}
declare -A keys  # arch|name -> key, of the compiles of this run
current() {  # arch, name, source, defines: whether that compile succeeded with today's inputs
    local key=${keys[$1|$2]:-}
    [ -n "$key" ] || key=$(compile_key "$1" "$3" "$4" "$2")
    [ -f "$out/$1/$2.$key.ok" ]
}

runtime_jobs=()  # "name|source|defines", every precision: the files whose kernels the CPU runtime launches
for src in test/cuda_cpu/*.cu; do runtime_jobs+=("$(basename "$src" .cu)|$src|"); done
for src in kernels/test_*.cu train_gpt2.cu; do
    for p in FP32 FP16 BF16; do runtime_jobs+=("$(basename "$src" .cu)_$p|$src|-DENABLE_$p"); done
done
jobs=()
for job in "${runtime_jobs[@]}"; do
    case $job in *"|-DENABLE_"*) p=${job##*ENABLE_}; case " $precisions " in *" $p "*) ;; *) continue ;; esac ;; esac
    jobs+=("$job")
done
# test/test_gpu_engine.cu includes train_gpt2.cu (less its main(), under TRAIN_GPT2_NO_MAIN) and adds
# host code alone, so each of the two compiles stands for the other's where they would do the same
# work, its twin:
#   - sm_90a (device code alone): test_gpu_engine.cu's device code is the trainer's (the same 69
#     kernels, the same ptxas lines, compared once), so train_gpt2.cu's compile of the same precision
#     stands for it (before: its three sm_90a compiles, 50 s of CPU, and 12 s of make test's build for
#     the register table);
#   - sm_80 with host code: test_gpu_engine.cu's compile is train_gpt2.cu's device and host code and
#     the test's host code, all but the trainer's main(), five lines of calls that take no floatX
#     (make train's nvcc -c compiles them, and the CPU runtime's build of each precision); it stands
#     for train_gpt2.cu's (three compiles, 57 s of CPU, AMD EPYC).
# Were a kernel or __device__ function added to the test, or more than main() left out of it, each
# would be compiled for both architectures like any other file.
declare -A twin  # "arch|name" -> "name|source|defines" of the compile that stands for it
only_main_left_out() {  # train_gpt2.cu's one TRAIN_GPT2_NO_MAIN block holds main() and nothing else
    [ "$(grep -c '^#if.*TRAIN_GPT2_NO_MAIN' train_gpt2.cu)" = 1 ] &&
        [ "$(sed -n '/^#ifndef TRAIN_GPT2_NO_MAIN/,/^#endif/p' train_gpt2.cu | grep -vE '^(#ifndef|#endif|    |int main\(|}$)')" = "" ]
}
if ! grep -qE '__global__|__device__' test/test_gpu_engine.cu && only_main_left_out; then
    for p in FP32 FP16 BF16; do
        twin[sm90a|test_gpu_engine_$p]="train_gpt2_$p|train_gpt2.cu|-DENABLE_$p"
        [ $build_only = 1 ] || twin[sm80|train_gpt2_$p]="test_gpu_engine_$p|test/test_gpu_engine.cu|-DENABLE_$p"
    done
fi
[ $build_only = 1 ] || for p in FP32 FP16 BF16; do jobs+=("test_gpu_engine_$p|test/test_gpu_engine.cu|-DENABLE_$p"); done
compile_of() {  # arch, name, source, defines -> "name|source|defines" of the compile that stands for it
    if [ -n "${twin[$1|$2]:-}" ]; then echo "${twin[$1|$2]}"; else echo "$2|$3|$4"; fi
}
# dev/cuda's programs in the precisions the project builds them in: test/gpu/check.sh builds the
# benchmark and the flash tests in FP16 and BF16 with nvcc; count_attention is the kernel report's, in
# FP16 (its BF16 compile, 24 s of CPU, built nothing anyone runs); test_qk_tile takes no precision.
declare -A dev_precisions=([count_attention]="FP16" [test_qk_tile]="FP16")
[ $build_only = 1 ] || for src in dev/cuda/*.cu; do
    name=$(basename "$src" .cu)
    for p in ${dev_precisions[$name]:-FP16 BF16}; do jobs+=("${name}_$p|$src|-DENABLE_$p"); done
done
[ $build_only = 1 ] || for h in kernels/*.cuh dev/cuda/*.cuh; do
    jobs+=("header_$(basename "$h" .cuh)|$(header_unit "$h")|-DENABLE_FP16")
done
archs="sm90a"
[ $build_only = 1 ] || archs="sm90a sm80"

# Whether a log --reuse gives may stand for a compile: "take LOG", "not: WHY", or nothing when none is given.
reuse_verdict() {  # arch, name, source
    local r log="" newer
    for r in ${reuse[@]+"${reuse[@]}"}; do [ "${r%%=*}" = "$2" ] && log=${r#*=}; done
    [ -n "$log" ] && [ "$1" = sm90a ] || return
    if [ ! -f "$log" ]; then echo "not: no $log"
    elif [ -z "${NVCC:-}" ]; then echo "not: NVCC does not name the nvcc that wrote $log"
    elif [ "$("$NVCC" --version 2>/dev/null | tail -n 1)" != "$nvcc_version" ]; then
        echo "not: $log was written by $NVCC, another build of nvcc than $nvcc"
    elif newer=$(find $key_inputs "$3" -newer "$log" -print -quit) && [ -n "$newer" ]; then
        echo "not: $newer is newer than $log"
    elif grep -qE ': error|error:|errors? detected|^(ptxas|nvcc) (error|fatal)' "$log"; then echo "not: $log reports an error"
    elif ! grep -q "for 'sm_90a'" "$log"; then echo "not: $log holds no sm_90a code"
    else echo "take $log"
    fi
}

declare -A compiled=([sm90a]=0 [sm80]=0) cached=([sm90a]=0 [sm80]=0)
taken=()     # compiles taken from --reuse's logs
pids=()
names=()     # "name:source:defines" of the files checked
for job in "${jobs[@]}"; do
    IFS='|' read -r name src defs <<< "$job"
    if [ "$name" = test_nccl ] && [ -z "$mpi_flags" ]; then
        echo "SKIP nvcc_compiles_$name: needs mpi.h (apt-get install libopenmpi-dev)"
        continue
    fi
    names+=("$name:$src:$defs")
    for a in $archs; do
        [ -n "${twin[$a|$name]:-}" ] && continue  # its twin's compile stands for it
        dir=$out/$a
        key=$(compile_key "$a" "$src" "$defs" "$name")
        keys[$a|$name]=$key
        if [ -f "$dir/$name.$key.ok" ]; then
            cached[$a]=$((cached[$a] + 1))
            continue
        fi
        rm -f "$dir/$name".*.ok
        verdict=$(reuse_verdict "$a" "$name" "$src")
        case $verdict in
            "take "*) cp "${verdict#take }" "$dir/$name.log" && touch "$dir/$name.$key.ok"
                      taken+=("$name (${verdict#take })"); continue ;;
            "not: "*) echo "nvcc: $name's sm_90a code is compiled here, ${verdict#not: }" ;;
        esac
        ( "$nvcc" $(flags_for "$a" "$name") -Xptxas -v -std=c++17 $defs -I. -Itest -Ireference -Icommon -Ikernels -Idev/cuda $mpi_flags \
              "$src" -o "$dir/$name.${arch_out[$a]}" > "$dir/$name.log" 2>&1 && touch "$dir/$name.$key.ok" ) &
        pids+=($!)
        compiled[$a]=$((compiled[$a] + 1))
        # two at a time: CI has two cores
        if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    done
done
wait
summary="nvcc:"
for a in $archs; do
    summary="$summary ${arch_what[$a]}: ${compiled[$a]} compiled, ${cached[$a]} cached;"
done
[ ${#taken[@]} = 0 ] || summary="$summary taken from the log of a build: ${taken[*]};"
echo "${summary%;}"

if [ $build_only = 1 ]; then
    # The runtime's table: sm_90a entries of every current compile of the files it runs, in every
    # precision (a precision not asked for this time counts where its compiles are still current: the
    # table never holds a kernel's registers from sources that have changed since). The last one seen
    # of a name in one file wins; the runtime keeps the smallest and largest count of a name over files.
    db="$out/registers.db"
    {
        echo "# mangled_name registers stack_frame_bytes static_smem_bytes (ptxas -v, sm_90a, nvcc $("$nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p'))"
        for job in "${runtime_jobs[@]}"; do
            IFS='|' read -r name src defs <<< "$job"
            current sm90a "$name" "$src" "$defs" || continue
            awk '/Compiling entry function/ { fn = ""; if ($0 ~ /sm_90/) { match($0, /function .[^'\'']*/); fn = substr($0, RSTART + 10, RLENGTH - 10) }; stack = 0; next }
                 /bytes stack frame/ && fn != "" { stack = $1; next }
                 /Used [0-9]+ registers/ && fn != "" { match($0, /Used [0-9]+/); regs = substr($0, RSTART + 5, RLENGTH - 5);
                     smem = 0; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11);
                     print fn, regs, stack, smem; fn = "" }' "$out/sm90a/$name.log"
        done | sort -u
    } > "$db.tmp" && mv "$db.tmp" "$db"
    exit 0
fi
status=0
for nk in "${names[@]}"; do
    IFS=':' read -r name src defs <<< "$nk"
    failed=()
    for a in $archs; do
        IFS='|' read -r cname csrc cdefs <<< "$(compile_of "$a" "$name" "$src" "$defs")"
        current "$a" "$cname" "$csrc" "$cdefs" || failed+=("$a")
    done
    if [ ${#failed[@]} = 0 ]; then
        echo "PASS nvcc_compiles_${name}_sm80_sm90a"
    else
        what=""
        for a in "${failed[@]}"; do what="$what${what:+ and }${arch_what[$a]}"; done
        echo "FAIL nvcc_compiles_${name}_sm80_sm90a: nvcc $defs $src failed for $what:"
        for a in "${failed[@]}"; do
            IFS='|' read -r cname _ <<< "$(compile_of "$a" "$name" "$src" "$defs")"
            grep -m 8 -E "error|Error" "$out/$a/$cname.log" | sed 's/^/  /'
        done
        status=1
    fi
done

# ---- registers and spills of the kernels of kernels/ (from the kernel tests' ptxas output) ----
kernel_names=$(perl -0777 -ne 'print "$1\n" while /__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?(?:void\s+)?(\w+)\s*\(/g' kernels/*.cuh | sort -u)
table="$out/registers.txt"
{
    echo "# ptxas -v resource use of the kernels of kernels/ (nvcc $("$nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p'))"
    echo "# precision arch registers spill_stores_bytes spill_loads_bytes stack_frame_bytes kernel"
    for nk in "${names[@]}"; do
        IFS=':' read -r name src defs <<< "$nk"
        case $name in test_gpu_engine_*) continue ;; test_*_FP32|test_*_FP16|test_*_BF16) ;; *) continue ;; esac
        prec=$(echo "${name##*_}" | tr 'A-Z' 'a-z')
        for a in $archs; do
            current "$a" "$name" "$src" "$defs" || continue
            # ptxas: "Compiling entry function 'NAME' for 'sm_XX'", then "... N bytes stack frame, N bytes
            # spill stores, N bytes spill loads", then "Used N registers, ..."
            awk -v prec="$prec" '
                /Compiling entry function/ { match($0, /function .[^'\'']*/); fn = substr($0, RSTART + 10, RLENGTH - 10);
                                             match($0, /sm_[0-9]+a?/); arch = substr($0, RSTART, RLENGTH); stack = st = ld = 0; next }
                /bytes stack frame/ && fn != "" { stack = $1; st = $5; ld = $9; next }
                /Used [0-9]+ registers/ && fn != "" { match($0, /Used [0-9]+/); regs = substr($0, RSTART + 5, RLENGTH - 5);
                                                      print prec, arch, regs, st, ld, stack, fn; fn = "" }' "$out/$a/$name.log"
        done
    done | c++filt | sed 's/ void / /' | sort -u -k7V -k1,1 -k2,2 |
        # kernels of kernels/ only: the name (7th field on) up to its template arguments or parameters
        awk 'NR == FNR { kernel[$0] = 1; next }
             { fn = $0; for (i = 1; i <= 6; i++) sub(/^[^ ]+ +/, "", fn); base = fn; sub(/[<(].*/, "", base);
               if (base in kernel) print $1, $2, $3, $4, $5, $6, fn }' <(echo "$kernel_names") -
} > "$table.tmp" && mv "$table.tmp" "$table"
n=$(grep -vc '^#' "$table")
if [ "$n" -gt 0 ]; then
    echo "PASS nvcc_kernel_registers_recorded: $n kernel builds in $table"
    echo "  fp16 kernel: registers and spill stores/loads (bytes) at sm_80 | sm_90a"
    grep '^fp16 ' "$table" | sort -k7V -k2,2 | awk '{ key = $7; for (i = 8; i <= NF; i++) key = key " " $i; k = key;
            v[k, $2] = $3 " regs, " $4 "/" $5 " spill"; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
        END { for (i = 1; i <= n; i++) { k = order[i]; sub(/\(.*/, "", k);
              printf "  %-60s %-22s | %s\n", k, v[order[i], "sm_80"], v[order[i], "sm_90a"] } }'
else
    echo "FAIL nvcc_kernel_registers_recorded: no ptxas resource lines in $out/sm80/test_*.log, $out/sm90a/test_*.log"
    status=1
fi
exit $status
