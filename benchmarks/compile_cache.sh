# Sourced by the device scripts (gpu_bench.sh, kda_bench.sh): tirxh's compile cache travels
# between device calls, as FLA's autotune results do.
#
# A call starts on a fresh machine more often than not, and assembling the zoo's large kernels
# is most of its set-up (kda_bench.sh: 64 s of 16-core ptxas before the smoke pass, 2026-12-02,
# of a 30-minute session budget). The cache is content-addressed (tirxh/core/cache.py: the key
# covers the PTX, the target, the options, the transforms and the toolchain's versions), so an
# entry carried from another machine is either exactly what this one would build or never
# looked up: nothing stale can be used.
#
#   restore_compile_cache            .carry/tirxh-cache.tgz (an earlier call's $OUT/tirxh-cache.tgz)
#                                    -> $TIRXH_CACHE_DIR
#   save_compile_cache OUTDIR        $TIRXH_CACHE_DIR's cubins and logs -> OUTDIR/tirxh-cache.tgz
#                                    (no SASS text; skipped past COMPILE_CACHE_MAX_MB, default 15,
#                                    under the device's 16 MiB per returned file)

restore_compile_cache() {
    [ -f .carry/tirxh-cache.tgz ] || return 0
    mkdir -p "$TIRXH_CACHE_DIR"
    if tar -xzf .carry/tirxh-cache.tgz -C "$TIRXH_CACHE_DIR" 2>/dev/null; then
        echo "=== carried compile cache: $(find "$TIRXH_CACHE_DIR" -name cubin | wc -l) cubins"
    else
        echo "=== carried compile cache unreadable (.carry/tirxh-cache.tgz): building from scratch"
    fi
}

save_compile_cache() {
    local out=$1 max_mb=${COMPILE_CACHE_MAX_MB:-15}
    [ -d "$TIRXH_CACHE_DIR" ] || return 0
    (cd "$TIRXH_CACHE_DIR" && find . \( -name cubin -o -name log \) -print0 \
        | tar -czf "$out/tirxh-cache.tgz.part" --null -T -) 2>/dev/null || return 0
    if [ "$(stat -c %s "$out/tirxh-cache.tgz.part")" -gt $(( max_mb * 1048576 )) ]; then
        echo "=== compile cache over ${max_mb} MB: not saved"
        rm -f "$out/tirxh-cache.tgz.part"
        return 0
    fi
    mv "$out/tirxh-cache.tgz.part" "$out/tirxh-cache.tgz"
}
