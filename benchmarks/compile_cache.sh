# Sourced by the device scripts (gpu_bench.sh, kda_bench.sh): the compile caches travel between
# device calls, as FLA's autotune results do.
#
# A call starts on a fresh machine more often than not, and compiling is much of its set-up:
# assembling the zoo's large kernels (kda_bench.sh: 64 s of 16-core ptxas before the smoke
# pass, 2026-12-02) and torch.compile's first compile of every baseline shape, inside the jobs
# (the zoo run of session 7: ~24 s of the board per item). Both caches are content-addressed:
# tirxh's key covers the PTX, the target, the options, the transforms and the toolchain's
# versions (tirxh/core/cache.py); Inductor's and Triton's cover the graph, torch, Triton and the
# device. An entry carried from another machine is either exactly what this one would build or
# never looked up.
#
#   restore_compile_cache     .carry/tirxh-cache.tgz -> $TIRXH_CACHE_DIR,
#                             .carry/inductor-cache.tgz -> $TORCHINDUCTOR_CACHE_DIR and
#                             .carry/triton-cache.tgz -> $TRITON_CACHE_DIR (each when set)
#   save_compile_cache OUT    the same back to OUT/ (tirxh: cubins and logs, no SASS text);
#                             an archive over COMPILE_CACHE_MAX_MB (default 15, under the
#                             device's 16 MiB per returned file) is not saved, except
#                             tirxh's, whose least recently used entries are left out
#                             until it fits (session 13: the zoo's cubins passed 15 MB)
#
# Triton's cache (kda_bench.sh sets TRITON_CACHE_DIR) holds FLA's compiled kernels beside their
# autotune results: with the results carried (triton-autotune.tgz, kilobytes) a call still
# compiled every chosen config of every shape before its first FLA job: session 11's slimpacks
# prewarm spent 74 s on pack6 H96's forward and 132 s on its forward + backward. Its entries
# are keyed by source, options, Triton and the device, like the others here; a whole kernel
# directory travels (Triton reads every file its group names).

restore_carried() {  # restore_carried NAME DIR
    local name=$1 dir=$2
    [ -n "$dir" ] && [ -f ".carry/$name.tgz" ] || return 0
    mkdir -p "$dir"
    if tar -xzf ".carry/$name.tgz" -C "$dir" 2>/dev/null; then
        echo "=== carried $name: $(find "$dir" -type f | wc -l) files"
    else
        echo "=== carried $name unreadable (.carry/$name.tgz): building from scratch"
    fi
}

save_carried() {  # save_carried NAME DIR OUT [find predicates]
    local name=$1 dir=$2 out=$3 max_mb=${COMPILE_CACHE_MAX_MB:-15}
    shift 3
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    (cd "$dir" && find . -type f "$@" -print0 \
        | tar -czf "$out/$name.tgz.part" --null -T -) 2>/dev/null || return 0
    if [ "$(stat -c %s "$out/$name.tgz.part")" -gt $(( max_mb * 1048576 )) ]; then
        echo "=== $name over ${max_mb} MB: not saved"
        rm -f "$out/$name.tgz.part"
        return 0
    fi
    mv "$out/$name.tgz.part" "$out/$name.tgz"
}

restore_compile_cache() {
    restore_carried tirxh-cache "${TIRXH_CACHE_DIR:-}"
    restore_carried inductor-cache "${TORCHINDUCTOR_CACHE_DIR:-}"
    restore_carried triton-cache "${TRITON_CACHE_DIR:-}"
}

save_recent() {  # save_recent NAME DIR OUT: tirxh's cache, newest entries first, under the cap
    # An entry's directory mtime is its last build or hit (tirxh/core/cache.py), so when the
    # whole cache is over the cap the entries this call used still travel: the oldest quarter
    # is left out until the archive fits, rather than the archive being dropped.
    local name=$1 dir=$2 out=$3 max_mb=${COMPILE_CACHE_MAX_MB:-15} list keep total
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    list=$(cd "$dir" && find . -mindepth 2 -maxdepth 2 -type d ! -name '.tmp-*' \
        -printf '%T@ %p\n' | sort -rn | cut -d' ' -f2-)
    total=$(printf '%s\n' "$list" | grep -c .)
    keep=$total
    while [ "$keep" -gt 0 ]; do
        (cd "$dir" && printf '%s\n' "$list" | head -n "$keep" \
            | while read -r d; do printf '%s\0' "$d/cubin" "$d/log"; done \
            | tar -czf "$out/$name.tgz.part" --null --ignore-failed-read -T -) 2>/dev/null
        if [ "$(stat -c %s "$out/$name.tgz.part" 2>/dev/null || echo 0)" -le \
              $(( max_mb * 1048576 )) ]; then
            mv "$out/$name.tgz.part" "$out/$name.tgz"
            [ "$keep" = "$total" ] || echo "=== $name over ${max_mb} MB: saved the $keep \
most recently used of $total entries"
            return 0
        fi
        keep=$(( keep * 3 / 4 ))
    done
    rm -f "$out/$name.tgz.part"
    echo "=== $name over ${max_mb} MB: not saved"
}

save_compile_cache() {
    save_recent tirxh-cache "${TIRXH_CACHE_DIR:-}" "$1"
    save_carried inductor-cache "${TORCHINDUCTOR_CACHE_DIR:-}" "$1"
    save_carried triton-cache "${TRITON_CACHE_DIR:-}" "$1"
}
