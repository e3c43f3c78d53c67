"""benchmarks/compile_cache.sh: tirxh's and torch.compile's compile caches saved at the end of
one device call and restored at the start of the next (tirxh's: cubins and logs only; a cache
too big to come back is not saved rather than truncated)."""

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "benchmarks" / "compile_cache.sh"


def bash(cwd, script, **env):
    caches = ("TIRXH_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    full = {**{k: v for k, v in os.environ.items() if k not in caches}, **env}
    return subprocess.run(["bash", "-c", f". {LIB}\n{script}"], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=30, check=True)


def fill(cache: Path, key: str, cubin: bytes):
    d = cache / key[:2] / key
    d.mkdir(parents=True)
    (d / "cubin").write_bytes(cubin)
    (d / "log").write_text("ptxas info: 0 bytes stack")
    (d / "sass").write_text("SASS " * 1000)


def test_a_saved_cache_restores_its_cubins_and_logs_without_sass(tmp_path):
    first, second, out = tmp_path / "first", tmp_path / "second", tmp_path / "out"
    out.mkdir()
    fill(first, "ab" + "0" * 62, b"\x7fELF one")
    fill(first, "cd" + "1" * 62, b"\x7fELF two")
    bash(tmp_path, 'save_compile_cache "$OUTDIR"', TIRXH_CACHE_DIR=str(first), OUTDIR=str(out))
    with tarfile.open(out / "tirxh-cache.tgz") as t:
        names = sorted(n for n in t.getnames() if not n.endswith(("/", ".")))
    assert all(n.endswith(("cubin", "log")) for n in names) and len(names) == 4

    carry = tmp_path / "next_call"
    (carry / ".carry").mkdir(parents=True)
    (out / "tirxh-cache.tgz").rename(carry / ".carry" / "tirxh-cache.tgz")
    done = bash(carry, "restore_compile_cache", TIRXH_CACHE_DIR=str(second))
    assert "carried tirxh-cache: 4 files" in done.stdout
    assert (second / "cd" / ("cd" + "1" * 62) / "cubin").read_bytes() == b"\x7fELF two"
    assert not list(second.rglob("sass"))


def test_no_carried_cache_is_nothing_and_an_oversized_one_is_not_saved(tmp_path):
    done = bash(tmp_path, "restore_compile_cache", TIRXH_CACHE_DIR=str(tmp_path / "c"))
    assert done.stdout == "" and not (tmp_path / "c").exists()
    cache, out = tmp_path / "big", tmp_path / "out"
    out.mkdir()
    fill(cache, "ef" + "2" * 62, os.urandom(1536 * 1024))  # incompressible 1.5 MB
    done = bash(tmp_path, 'save_compile_cache "$OUTDIR"', TIRXH_CACHE_DIR=str(cache),
                OUTDIR=str(out), COMPILE_CACHE_MAX_MB="1")
    assert "tirxh-cache over 1 MB: not saved" in done.stdout
    assert list(out.iterdir()) == []


def round_trip(tmp_path, var, name, files):
    """Write `files` ({relative path: bytes}) under the cache that `var` names, save the
    compile caches (tirxh's dir empty), carry `name`.tgz to a next call and restore it there:
    (that call's stdout, its cache dir)."""
    src, out, back = tmp_path / "src", tmp_path / "out", tmp_path / "call2"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    out.mkdir()
    bash(tmp_path, 'save_compile_cache "$OUTDIR"', **{var: str(src)},
         TIRXH_CACHE_DIR=str(tmp_path / "none"), OUTDIR=str(out))
    assert [p.name for p in out.iterdir()] == [f"{name}.tgz"]
    (back / ".carry").mkdir(parents=True)
    (out / f"{name}.tgz").rename(back / ".carry" / f"{name}.tgz")
    done = bash(back, "restore_compile_cache", **{var: str(back / "c")},
                TIRXH_CACHE_DIR=str(back / "tx"))
    assert not (back / "tx").exists()
    return done.stdout, back / "c"


def test_inductors_cache_travels_whole_when_its_directory_is_set(tmp_path):
    out, got = round_trip(tmp_path, "TORCHINDUCTOR_CACHE_DIR", "inductor-cache",
                          {"fxgraph/ab/entry": b"graph", "triton/0/k/k.cubin": b"\x7fELF"})
    assert "carried inductor-cache: 2 files" in out, out
    assert (got / "triton" / "0" / "k" / "k.cubin").read_bytes() == b"\x7fELF"


def test_tritons_cache_travels_whole_beside_the_others(tmp_path):
    """FLA's compiled kernels (kda_bench.sh's TRITON_CACHE_DIR): every file of a kernel's
    directory, its IR and group file included, since Triton reads all that its group names."""
    out, got = round_trip(tmp_path, "TRITON_CACHE_DIR", "triton-cache", {
        f"HASH/{n}": b"{}" for n in ("chunk_fwd.json", "chunk_fwd.ptx", "__grp__chunk_fwd.json",
                                     "chunk_fwd.autotune.json")} | {
        "HASH/chunk_fwd.cubin": b"\x7fELF"})
    assert "carried triton-cache: 5 files" in out, out
    assert (got / "HASH" / "chunk_fwd.cubin").read_bytes() == b"\x7fELF"


def test_both_device_scripts_restore_and_save_it():
    for name in ("gpu_bench.sh", "kda_bench.sh"):
        text = (ROOT / "benchmarks" / name).read_text()
        assert ". benchmarks/compile_cache.sh" in text, name
        assert text.index("restore_compile_cache") < text.index("save_compile_cache"), name


def test_an_oversized_tirxh_cache_keeps_its_most_recently_used_entries(tmp_path):
    """The zoo's cubins passed the 15 MB cap in session 13 and the whole archive was dropped:
    now the least recently used entries (oldest directory mtime, which a hit refreshes) are left
    out until the archive fits."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    out.mkdir()
    keys = [f"{i:02d}" + str(i % 10) * 62 for i in range(8)]
    for i, key in enumerate(keys):
        fill(cache, key, os.urandom(300 * 1024))  # incompressible: 8 x 300 KB over a 1 MB cap
        os.utime(cache / key[:2] / key, (1000 + i, 1000 + i))
    done = bash(tmp_path, 'save_compile_cache "$OUTDIR"', TIRXH_CACHE_DIR=str(cache),
                OUTDIR=str(out), COMPILE_CACHE_MAX_MB="1")
    assert "most recently used of 8 entries" in done.stdout, done.stdout
    with tarfile.open(out / "tirxh-cache.tgz") as t:
        kept = {Path(n).parent.name for n in t.getnames() if n.endswith("cubin")}
    assert kept and kept == set(keys[-len(kept):]), kept  # the newest ones, none older
    assert (out / "tirxh-cache.tgz").stat().st_size <= 1048576
    assert not list(out.glob("*.part"))


def test_a_cache_hit_marks_the_entry_as_recently_used(tmp_path):
    from tirxh.core.cache import ArtifactCache

    cache = ArtifactCache(tmp_path)
    cache.put("ab" + "0" * 62, b"\x7fELF", "log")
    entry = tmp_path / "ab" / ("ab" + "0" * 62)
    os.utime(entry, (1000, 1000))
    assert cache.get("ab" + "0" * 62) == (b"\x7fELF", "log")
    assert entry.stat().st_mtime > 1000
