"""One worker process of ``tirxh check -n N``: configure, collect, then run the items it is sent.

A worker is started by `tirxh.core.dist` (``multiprocessing``'s *spawn*: a fresh interpreter,
nothing inherited but the command line, the working directory, the environment and
``sys.path``). It builds its own plugin manager and `Config` from the main process's command
line (`Config.worker` set, so reporters stay out of it), collects the same items, and answers
each ``("run", index, nodeid)`` with the item's `ItemReport` as JSON text. It never calls a
reporting hook: the main process alone reports, in collection order.

Its output: what configuration and collection print (warnings, a kernel module's prints) was
already printed once by the main process, so it is discarded; afterwards the worker's stdout goes
to stderr, so ``--json`` keeps stdout for the one document. It ignores SIGINT: Ctrl-C reaches the
whole process group, and the main process stops its workers itself.

Messages to the main process: ``("ready", n_items)``, ``("startup_error", text)``,
``("report", index, json_text, cache_counts)``, ``("missing", index)`` (a node id this worker did
not collect) and ``("crash", index, text)`` (something escaped the item's phases).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import traceback

# `cli` imports `main`, which imports `dist`, which starts this module's `worker_main`: a module
# object (not its names) keeps the cycle harmless whichever module is imported first
from . import cli
from .nodes import Session, collect
from .runner import run_item


def _cache_counts(config) -> tuple:
    c = config.cache
    return c.hits, c.misses, c.sass_hits


@contextlib.contextmanager
def _silenced():
    """stdout and stderr (the file descriptors, so C code and children too) to /dev/null."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _start(argv: list, wid: str):
    """The worker's `Config` and its items by node id."""
    config = cli.configure(argv, worker={"id": wid})
    session = Session(config, config.command)
    config.stash["session"] = session
    collect(session, config.getoption("paths") or [])
    return config, {i.nodeid: i for i in session.items}


def worker_main(argv: list, conn, wid: str) -> None:
    """The process's whole life (the target `tirxh.core.dist` starts)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _silenced():
            config, items = _start(argv, wid)
    except BaseException:
        conn.send(("startup_error", traceback.format_exc()))
        return
    os.dup2(2, 1)  # a kernel's or plugin's print must not corrupt the main's --json stdout
    conn.send(("ready", len(items)))
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:  # the main process is gone: nothing left to answer
                return
            if msg[0] == "stop":
                return
            _, index, nodeid = msg
            item = items.get(nodeid)
            if item is None:
                conn.send(("missing", index))
                continue
            before = _cache_counts(config)
            try:
                payload = json.dumps(run_item(item, config.command).to_json(), default=str)
            except BaseException:  # run_item reports what it can; this is what it could not
                conn.send(("crash", index, traceback.format_exc()))
                continue
            counts = tuple(a - b for a, b in zip(_cache_counts(config), before))
            conn.send(("report", index, payload, counts))
    finally:
        config.pm.hook.tirxh_unconfigure(config=config)
