"""Test helpers: a stand-in for `kcoral.client.KCoralClient` that answers from fixtures, and
stand-in CUDA tools (an executable Python script; an ncu that replays fixture exports)."""

import hashlib
import stat
import sys
import textwrap


class FakeClient:
    def __init__(self, tools_result, refuse=None):
        self.blobs, self.docs, self.tools_result, self.refuse = {}, [], tools_result, refuse

    def put_blob(self, data):
        dg = hashlib.sha256(data).hexdigest()
        self.blobs[dg] = data
        return dg

    def submit(self, doc, timeout=None):
        doc = doc.to_doc() if hasattr(doc, "to_doc") else doc  # a kcoral.job.Job or its JSON
        self.docs.append(doc)
        if self.refuse is not None:
            from kcoral.client import KCoralError
            raise KCoralError("INVALID_ARGUMENT", self.refuse)
        yield {"state": "done", "job_id": "j1", "message": "",
               "result": {"status": "ok", "tools": self.tools_result}}

    def download(self, dg):
        return self.blobs[dg]


def fake_binary(tmp_path, name, body):
    """An executable `name` in `tmp_path` running the Python `body` (a stand-in CUDA tool)."""
    p = tmp_path / name
    p.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def fake_ncu(monkeypatch, tmp_path, details, source):
    """KCORAL_NCU: a stand-in ncu that logs its argv to calls.txt, writes a report for ``-o``
    and prints `details` / `source` for the two exports; returns the work dir and the log."""
    log = tmp_path / "calls.txt"
    ncu = fake_binary(tmp_path, "ncu", f"""
        import sys, pathlib
        args = sys.argv[1:]
        open({str(log)!r}, "a").write(" ".join(args) + "\\n")
        if "-o" in args:
            pathlib.Path(args[args.index("-o") + 1] + ".ncu-rep").write_bytes(b"NVRP fake")
        elif "details" in args:
            sys.stdout.write(open({str(details)!r}).read())
        elif "source" in args:
            sys.stdout.write(open({str(source)!r}).read())
    """)
    monkeypatch.setenv("KCORAL_NCU", ncu)
    work = tmp_path / "work"
    work.mkdir()
    return work, log
