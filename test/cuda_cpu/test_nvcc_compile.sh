#!/usr/bin/env bash
# test_nvcc_compile.sh: every .cu and .cuh of the project stays plain CUDA that nvcc compiles, for
# sm_80 (A100) and sm_90a (H100: sm_90 and its wgmma, which the flash kernels' Hopper path needs; a
# superset of sm_90), both in one nvcc run per file (compile only; nothing runs without a
# GPU): the runtime's own tests, every kernel test and the GPU engine's contract test in each
# precision, train_gpt2.cu itself, everything in dev/cuda, and each header of kernels/ and dev/cuda
# alone (a file that includes only it, so a header that forgets an include fails here). A compile is
# skipped when nothing it could read changed since its last success: the key covers the source,
# every project header (.h, .cuh), the defines, the architectures and nvcc's version.
#
# ptxas's resource use (-Xptxas -v) of every kernel of kernels/, per precision and architecture,
# goes to $out/registers.txt (registers, spill stores and loads in bytes, stack frame), and the FP16
# lines are printed.
#
# --build [PRECISION...] (make runs it so before the tests): compile what changed, for sm_90a alone and
# only the files whose kernels the CPU runtime launches (its tests, the kernel tests, the engine's tests,
# the trainer; not dev/cuda nor the header units), in the precisions given (default all three: FP32
# FP16 BF16), in $out/sm90 (a cache of its own), and write $out/registers.db, every kernel's mangled
# name with its sm_90a registers and stack frame over every compile in that cache (the wgmma kernels'
# real ones: compiled for plain sm_90 they hold a trap and a few registers), which the CPU runtime
# reads to refuse a launch whose block a GPU could not give registers (test/cuda_cpu/README.md: "Launch
# resources"); no test lines. make test asks for FP16 (the precision of its kernel tests: nvcc was
# half of its build time), make test-long for all three.
set -u
cd "$(dirname "$0")/../.."
build_only=0
precisions="FP32 FP16 BF16"
if [ "${1:-}" = --build ]; then
    build_only=1
    shift
    [ $# -gt 0 ] && precisions="$*"
    for p in $precisions; do
        case $p in FP32|FP16|BF16) ;; *) echo "test_nvcc_compile.sh: --build takes FP32, FP16 or BF16, got '$p'"; exit 2 ;; esac
    done
fi
out=${CUDA_CPU_OUT:-build/cuda_cpu}/nvcc
mkdir -p "$out/headers"
nvcc=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
if [ ! -x "$nvcc" ]; then
    if [ $build_only = 1 ]; then
        echo "# no nvcc at make time: no kernel's registers are known" > "$out/registers.db"
        exit 0
    fi
    echo "SKIP nvcc_compile: no nvcc (CUDA toolkit) on this machine"
    exit 0
fi
archs="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a"
db="$out/registers.db"
if [ $build_only = 1 ]; then
    archs="-gencode arch=compute_90a,code=sm_90a"
    out="$out/sm90"
    mkdir -p "$out"
fi
mpi_flags=$(mpicxx -showme:compile 2>/dev/null || true)
# Everything a compile may include: one hash over all of it (a header edit recompiles all).
tree_key=$( (find kernels common reference test dev -name '*.h' -o -name '*.cuh' | sort | xargs cat; cat train_gpt2.cu cuda_libs.cuh train_gpt2_zero.cuh train_gpt2_pipe.cuh;
             echo "$archs"; "$nvcc" --version | tail -n 1) | sha1sum | cut -c1-16)

# A file per header that includes only it (rewritten only when its text changes, keeping the cache).
header_unit() {  # header path -> unit path
    local h=$1 unit="$out/headers/$(echo "$1" | tr '/.' '__').cu"
    local text="#include \"$h\""
    [ -f "$unit" ] && [ "$(cat "$unit")" = "$text" ] || echo "$text" > "$unit"
    echo "$unit"
}

# A compile's cache key: the whole tree's, its defines and its source.
compile_key() {  # source, defines
    (echo "$tree_key $2"; cat "$1") | sha1sum | cut -c1-16
}

jobs=()       # "name|source|defines"
not_asked=()  # the same, of the precisions --build was not asked for
for src in test/cuda_cpu/*.cu; do jobs+=("$(basename "$src" .cu)|$src|"); done
for src in kernels/test_*.cu test/test_gpu_engine.cu train_gpt2.cu; do
    for p in FP32 FP16 BF16; do
        job="$(basename "$src" .cu)_$p|$src|-DENABLE_$p"
        case " $precisions " in *" $p "*) jobs+=("$job") ;; *) not_asked+=("$job") ;; esac
    done
done
[ $build_only = 1 ] || for src in dev/cuda/*.cu; do
    for p in FP16 BF16; do jobs+=("$(basename "$src" .cu)_$p|$src|-DENABLE_$p"); done
done
[ $build_only = 1 ] || for h in kernels/*.cuh dev/cuda/*.cuh; do
    jobs+=("header_$(basename "$h" .cuh)|$(header_unit "$h")|-DENABLE_FP16")
done

pids=()
names=()
for job in "${jobs[@]}"; do
    IFS='|' read -r name src defs <<< "$job"
    if [ "$name" = test_nccl ] && [ -z "$mpi_flags" ]; then
        echo "SKIP nvcc_compiles_$name: needs mpi.h (apt-get install libopenmpi-dev)"
        continue
    fi
    key=$(compile_key "$src" "$defs")
    if [ ! -f "$out/$name.$key.ok" ]; then
        rm -f "$out/$name".*.ok
        ( "$nvcc" $archs -Xptxas -v -std=c++17 $defs -I. -Itest -Ireference -Icommon -Ikernels -Idev/cuda $mpi_flags \
              -c "$src" -o "$out/$name.o" > "$out/$name.log" 2>&1 && touch "$out/$name.$key.ok" ) &
        pids+=($!)
        # two at a time: CI has two cores
        if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
    names+=("$name:$key:$src:$defs")
done
wait
if [ $build_only = 1 ]; then
    # A precision not asked for this time keeps its compiles only where they are still current: the
    # table never holds a kernel's registers from sources that have changed since.
    for job in ${not_asked[@]+"${not_asked[@]}"}; do
        IFS='|' read -r name src defs <<< "$job"
        [ -f "$out/$name.$(compile_key "$src" "$defs").ok" ] || rm -f "$out/$name".*.ok "$out/$name.log" "$out/$name.o"
    done
    # The runtime's table: sm_90a entries of every compile (the last one seen of a name in one file wins;
    # the runtime keeps the smallest and largest count of a name over files).
    {
        echo "# mangled_name registers stack_frame_bytes static_smem_bytes (ptxas -v, sm_90a, nvcc $("$nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p'))"
        for log in "$out"/*.log; do
            awk '/Compiling entry function/ { fn = ""; if ($0 ~ /sm_90/) { match($0, /function .[^'\'']*/); fn = substr($0, RSTART + 10, RLENGTH - 10) }; stack = 0; next }
                 /bytes stack frame/ && fn != "" { stack = $1; next }
                 /Used [0-9]+ registers/ && fn != "" { match($0, /Used [0-9]+/); regs = substr($0, RSTART + 5, RLENGTH - 5);
                     smem = 0; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11);
                     print fn, regs, stack, smem; fn = "" }' "$log"
        done | sort -u
    } > "$db.tmp" && mv "$db.tmp" "$db"
    exit 0
fi
status=0
for nk in "${names[@]}"; do
    IFS=':' read -r name key src defs <<< "$nk"
    if [ -f "$out/$name.$key.ok" ]; then
        echo "PASS nvcc_compiles_${name}_sm80_sm90a"
    else
        echo "FAIL nvcc_compiles_${name}_sm80_sm90a: nvcc -arch sm_80,sm_90a $defs -c $src failed:"
        grep -m 8 -E "error|Error" "$out/$name.log" | sed 's/^/  /'
        status=1
    fi
done

# ---- registers and spills of the kernels of kernels/ (from the kernel tests' ptxas output) ----
kernel_names=$(perl -0777 -ne 'print "$1\n" while /__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?(?:void\s+)?(\w+)\s*\(/g' kernels/*.cuh | sort -u)
table="$out/registers.txt"
{
    echo "# ptxas -v resource use of the kernels of kernels/ (nvcc $("$nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p'))"
    echo "# precision arch registers spill_stores_bytes spill_loads_bytes stack_frame_bytes kernel"
    for log in "$out"/test_*_FP32.log "$out"/test_*_FP16.log "$out"/test_*_BF16.log; do
        [ -f "$log" ] || continue
        case $log in *gpu_engine*) continue ;; esac
        prec=$(basename "$log" .log | sed 's/.*_//' | tr 'A-Z' 'a-z')
        # ptxas: "Compiling entry function 'NAME' for 'sm_XX'", then "... N bytes stack frame, N bytes
        # spill stores, N bytes spill loads", then "Used N registers, ..."
        awk -v prec="$prec" '
            /Compiling entry function/ { match($0, /function .[^'\'']*/); fn = substr($0, RSTART + 10, RLENGTH - 10);
                                         match($0, /sm_[0-9]+a?/); arch = substr($0, RSTART, RLENGTH); stack = st = ld = 0; next }
            /bytes stack frame/ && fn != "" { stack = $1; st = $5; ld = $9; next }
            /Used [0-9]+ registers/ && fn != "" { match($0, /Used [0-9]+/); regs = substr($0, RSTART + 5, RLENGTH - 5);
                                                  print prec, arch, regs, st, ld, stack, fn; fn = "" }' "$log"
    done | c++filt | sed 's/ void / /' | sort -u -k7V -k1,1 -k2,2 | while read -r prec arch regs st ld stack fn; do
        base=$(echo "$fn" | sed 's/[<(].*//')
        grep -qx "$base" <<< "$kernel_names" && echo "$prec $arch $regs $st $ld $stack $fn"
    done
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
    echo "FAIL nvcc_kernel_registers_recorded: no ptxas resource lines in $out/test_*.log"
    status=1
fi
exit $status
