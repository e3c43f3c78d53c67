"""``python -m kcoral.runjob JOB.json [--out DIR] [--blobs DIR] [--iterations N] [--check]
[--baseline NAME]``

Runs one declarative job's launches on the local GPU without a daemon: the target process for
``ncu`` and ``compute-sanitizer`` (tools in `kcoral.tools` start it). It loads the module,
fills the buffers from the timing seed, runs the launches `--iterations` times, synchronizes,
and writes ``result.json`` (and with ``--save-outputs`` each output buffer as ``NAME.npy``) under
``--out``. ``--check`` runs the job's correctness runs instead and fails (exit 1) on a mismatch.
``--baseline NAME`` runs the job's baseline NAME instead of the kernel: once to warm it up
(torch.compile compiles, cuBLAS chooses and loads its kernel), then `--iterations` times inside
the device's profiler range (`kcoral.boards.Device.profiler_range`), so that ``ncu
--profile-from-start off`` sees the baseline's own launches and nothing else.
Blobs are read from ``--blobs`` or the ``_blob_root`` the job was written with.

Exit status: 0 ok, 1 correctness mismatch, 2 usage/validation error, 3 device fault.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

from .blobs import BlobStore
from .boards import BoardSpec
from .dtypes import dtype_of
from .errors import JobError, JobFailure
from .job import Job
from .measure import Session
from .plugins import registries


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kcoral.runjob", description=__doc__.split("\n")[2])
    ap.add_argument("job", help="JOB.json")
    ap.add_argument("--out", default=None, help="directory for result.json and outputs")
    ap.add_argument("--blobs", default=None, help="blob store directory")
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="run the correctness runs")
    ap.add_argument("--baseline", default=None,
                    help="run this baseline of the job (in a profiler range) instead of the kernel")
    ap.add_argument("--save-outputs", action="store_true")
    ap.add_argument("--board-type", default="cuda", help="cuda (default) or fake")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv)
    if a.check and a.baseline:
        print("kcoral.runjob: --check and --baseline: one or the other (the correctness runs "
              "check the kernel, a baseline run profiles the baseline)", file=sys.stderr)
        return 2

    try:
        doc = json.loads(pathlib.Path(a.job).read_text())
        root = a.blobs or doc.pop("_blob_root", None)
        doc.pop("_blob_root", None)
        if not root:
            raise JobError([("--blobs", "no blob directory given and the job has no _blob_root")])
        job = Job.from_json(doc)
    except (OSError, ValueError) as e:
        print(f"kcoral.runjob: {a.job}: {e}", file=sys.stderr)
        return 2
    regs = registries()
    spec = BoardSpec(name=f"{a.board_type}{a.device}", type=a.board_type, target=job.target,
                     options={"ordinal": a.device})
    try:
        dev = regs.board_types.get(a.board_type).open_device(spec)
    except KeyError as e:
        print(f"kcoral.runjob: --board-type: {e.args[0]}", file=sys.stderr)
        return 2
    out = pathlib.Path(a.out) if a.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    result = {"job": job.display_name, "iterations": a.iterations, "status": "ok"}
    code = 0
    try:
        if hasattr(dev, "begin_job"):
            dev.begin_job(job.doc)
        s = Session(job, dev, BlobStore(root), regs.baselines,
                    lambda st, m: print(f"[{st}] {m}", file=sys.stderr))
        s.setup()
        if a.check:
            result["correctness"] = s.correctness("before") + s.correctness("after")
        elif a.baseline:
            run = s.baseline_launcher(a.baseline)
            s.fill_inputs(job.timing.seed)
            run()  # the warm-up call, outside the range
            dev.sync()
            dev.profiler_range(True)
            for _ in range(a.iterations):
                run()
            dev.sync()
            dev.profiler_range(False)
            result["baseline"] = a.baseline
        else:
            s.fill_inputs(job.timing.seed)
            for _ in range(a.iterations):
                s.kernel()
            dev.sync()
        if out and a.save_outputs:
            for b in job.buffers:  # names are identifiers (kcoral.job): the files stay in out
                if b.output:
                    np.save(out / f"{b.name}.npy", dev.read(b.name, dtype_of(b.dtype),
                                                            tuple(b.shape)))
    except JobFailure as e:
        result.update(status="failed", error=e.to_json())
        if "correctness" in e.data:
            result["correctness"] = e.data["correctness"]
        code = 1 if e.type.startswith("correctness") else 3 if e.fatal else 2
    finally:
        dev.close()
    if out:
        (out / "result.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "correctness"}, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
