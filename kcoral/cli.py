"""``kcoral``: serve, agent, boards, jobs, show, status, cancel.

The daemon address comes from ``--daemon``, else ``KCORAL_ADDRESS``, else ``127.0.0.1:50051``;
the token from ``--token-file``, else ``KCORAL_TOKEN``. Every query command takes ``--json``.
Exit status: 0 ok, 1 the daemon answered with an error, 2 usage or connection error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time

from .agent import Agent
from .client import KCoralClient
from .errors import AgentRefused, KCoralError
from .server import Daemon, load_config

DEFAULT_ADDRESS = "127.0.0.1:50051"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kcoral", description="KCoral: the GPU benchmark daemon")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("serve", help="run the daemon with the local boards")
    s.add_argument("--config", help="kcoral.toml")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--state-dir")
    s.add_argument("--fake", type=int, default=None, help="add N fake boards (testing)")
    s.add_argument("--no-cuda", action="store_true", help="do not open local GPUs")
    s.add_argument("--port-file", help="write the bound port here once serving")
    s.add_argument("-v", "--verbose", action="store_true")

    a = sub.add_parser("agent", help="offer a local board to a remote daemon (dials out)")
    a.add_argument("--board-type", default="cuda")
    a.add_argument("--device", type=int, default=0)
    a.add_argument("--name")
    a.add_argument("--tag", action="append", default=[])
    a.add_argument("--cache-dir")
    a.add_argument("-v", "--verbose", action="store_true")

    for name, helptext in (("boards", "each board's state, queue and current job"),
                           ("jobs", "recent jobs (history from the daemon's store)"),
                           ("show", "one job: its request, state and result"),
                           ("status", "daemon version, uptime and queue"),
                           ("cancel", "cancel a queued or running job")):
        q = sub.add_parser(name, help=helptext)
        if name in ("show", "cancel"):
            q.add_argument("job_id")
        if name == "jobs":
            q.add_argument("--limit", type=int, default=20)
            q.add_argument("--client", default="")
            q.add_argument("--state", default="")
        q.add_argument("--json", action="store_true")
    for sp in sub.choices.values():
        if sp.prog.split()[-1] != "serve":
            sp.add_argument("--daemon", default=os.environ.get("KCORAL_ADDRESS", DEFAULT_ADDRESS))
        sp.add_argument("--token-file")
        sp.add_argument("--ca-file", help="TLS: the daemon's CA certificate")
    return p


def _token(ns):
    if ns.token_file:
        with open(ns.token_file) as f:
            return f.read().strip()
    return os.environ.get("KCORAL_TOKEN")


def main(argv=None) -> int:
    ns = _parser().parse_args(argv)
    if ns.cmd == "serve":
        return _serve(ns)
    if ns.cmd == "agent":
        return _agent(ns)
    try:
        with KCoralClient(ns.daemon, token=_token(ns), ca_file=ns.ca_file,
                          timeout=10.0) as c:
            return _query(ns, c)
    except KCoralError as e:
        print(f"kcoral {ns.cmd}: {e.code}: {e.message}", file=sys.stderr)
        return 2 if e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") else 1


def _query(ns, c) -> int:
    out = sys.stdout
    if ns.cmd == "boards":
        rows = c.boards()
        if ns.json:
            return _json(rows)
        out.write(f"{'board':<14}{'type':<8}{'target':<9}{'state':<13}{'queue':>6}  "
                  f"{'current job':<18}device\n")
        for b in rows:
            dev = b["properties"].get("device", "")
            extra = f"  ({b['unavailable']})" if b["unavailable"] else ""
            out.write(f"{b['name']:<14}{b['type']:<8}{b['target']:<9}{b['state']:<13}"
                      f"{b['queue_length']:>6}  {b['current_job'] or '-':<18}{dev}{extra}\n")
    elif ns.cmd == "jobs":
        rows = c.jobs(ns.limit, ns.client, ns.state)
        if ns.json:
            return _json([{k: v for k, v in r.items() if k != "job"} for r in rows])
        out.write(f"{'job':<18}{'state':<12}{'board':<12}{'client':<16}{'median':>12}  name\n")
        for r in rows:
            med = ((r["result"] or {}).get("timing") or {}).get("candidate", {}).get("median_ms")
            out.write(f"{r['job_id']:<18}{r['state']:<12}{r['board'] or '-':<12}"
                      f"{r['client'][:15]:<16}{(f'{med:.4f} ms' if med else '-'):>12}  "
                      f"{r['name']}\n")
    elif ns.cmd == "show":
        r = c.get_job(ns.job_id)
        if ns.json:
            return _json(r)
        res = r["result"] or {}
        out.write(f"job {r['job_id']}  {r['name']}  state {r['state']}  board {r['board']}  "
                  f"client {r['client']}\n")
        t = res.get("timing") or {}
        if t.get("candidate"):
            cd = t["candidate"]
            out.write(f"  median {cd['median_ms']:.5f} ms  IQR {cd['iqr_ms']:.5f} ms  "
                      f"n={cd['n']}  converged={t.get('converged')}\n")
            for k, v in t.get("baselines", {}).items():
                out.write(f"  {k}: median {v['median_ms']:.5f} ms  speedup {v['speedup']:.3f}x\n")
        if res.get("error"):
            out.write(f"  error {res['error']['type']}: {res['error']['message']}\n")
        for cr in res.get("correctness", []):
            out.write(f"  correctness ({cr['when']}, seed {cr['seed']}): "
                      f"{'ok' if cr['ok'] else 'MISMATCH'}\n")
    elif ns.cmd == "status":
        s = c.status()
        if ns.json:
            return _json(s)
        out.write(f"kcoral {s['version']} at {s['address']}: up {s['uptime_s']:.0f} s, "
                  f"{s['running']} running, {s['queued']} queued, {s['jobs_total']} jobs "
                  f"recorded\n")
    elif ns.cmd == "cancel":
        r = c.cancel(ns.job_id)
        if ns.json:
            return _json(r)
        out.write(f"{ns.job_id}: {r['state']}\n")
    return 0


def _json(obj) -> int:
    sys.stdout.write(json.dumps(obj, indent=1, default=str) + "\n")
    return 0


def _serve(ns) -> int:
    logging.basicConfig(level=logging.DEBUG if ns.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(ns.config) if ns.config else {}
        boards = cfg.setdefault("boards", {"cuda": {}, "sim": {}})
        if ns.no_cuda:
            boards.pop("cuda", None)
        if ns.fake:
            boards["fake"] = dict(boards.get("fake", {}), count=ns.fake)
        d = Daemon(cfg, state_dir=ns.state_dir, host=ns.host, port=ns.port)
        d.start()
    except (ValueError, OSError, KeyError) as e:
        print(f"kcoral serve: {e}", file=sys.stderr)
        return 2
    if ns.port_file:
        tmp = ns.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(d.port))
        os.replace(tmp, ns.port_file)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while not done.is_set():
            time.sleep(0.2)
    finally:
        logging.getLogger("kcoral").info("shutting down (grace %.0f s)", d.grace_s)
        d.stop()
    return 0


def _agent(ns) -> int:
    logging.basicConfig(level=logging.DEBUG if ns.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        ag = Agent(ns.daemon, ns.board_type, ns.name, _token(ns), ns.device, ns.tag,
                   ns.cache_dir, ca_file=ns.ca_file)
    except (RuntimeError, KeyError) as e:
        print(f"kcoral agent: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *a: ag.stop())
    try:
        ag.run()
    except AgentRefused as e:
        print(f"kcoral agent: refused by {ns.daemon}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        ag.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
