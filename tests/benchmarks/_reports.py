"""`tirxh bench --report-log` lines as the table scripts read them (report_tables.py): one
item report with its bench phase holding KCoral's result document, for the scripts' tests."""


def bench_item(kernel: str, case: str, result: dict, path: str = "kernels/x.py",
               error: str = "") -> dict:
    """An ``item_report`` of `kernel[case]` whose bench phase carries `result`; it passed
    unless `error` (the phase's longrepr) is given."""
    return {"event": "item_report", "kernel": kernel, "case": case,
            "nodeid": f"{path}::{kernel}[{case}]@sm_90a",
            "outcome": "failed" if error else "passed",
            "phases": [{"phase": "bench", "outcome": "passed", "longrepr": error,
                        "data": {"result": result}}]}
