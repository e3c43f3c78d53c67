"""The item listings of the benchmark scripts' no-GPU modes (zoo_perf_bench.sh --list,
kda_bench.sh with KDA_BENCH_LIST=1): "== NAME" headers, each followed by the
`tirxh bench --collect-only` lines of the items that section selects."""


def sections(out: str) -> dict:
    """{header: [kernel[case], ...]} of a listing."""
    got, head = {}, None
    for line in out.splitlines():
        if line.startswith("== "):
            head = line[3:]
            got[head] = []
        elif "::" in line:
            got[head].append(line.split("::")[1].split("@")[0])
    return got
