"""The durations history that orders ``-n``'s work, longest first."""

import json
from types import SimpleNamespace

from tirxh.core import durations
from tirxh.core.cache import ArtifactCache


def _config(tmp_path, command="check"):
    return SimpleNamespace(rootdir=tmp_path / "proj", command=command,
                           cache=ArtifactCache(tmp_path / "cache"))


def _item(nodeid, suite=True, small=True):
    case = SimpleNamespace(small=small) if suite else None
    return SimpleNamespace(nodeid=nodeid, suite=object() if suite else None, case=case)


def test_saved_durations_are_merged_and_read_back(tmp_path):
    config = _config(tmp_path)
    durations.save(config, [SimpleNamespace(nodeid="a", duration=1.23456)])
    durations.save(config, [SimpleNamespace(nodeid="b", duration=2.0)])
    assert durations.load(config) == {"a": 1.235, "b": 2.0}
    assert durations.load(_config(tmp_path, "build")) == {}  # per command
    leftovers = [p.name for p in durations.history_path(config).parent.iterdir()]
    assert leftovers == [durations.history_path(config).name]  # the temp file was renamed


def test_an_unreadable_history_is_no_history(tmp_path):
    config = _config(tmp_path)
    path = durations.history_path(config)
    path.parent.mkdir(parents=True)
    for text in ("{not json", json.dumps([1, 2]), json.dumps({"a": "slow"})):
        path.write_text(text)
        assert durations.load(config) == {}


def test_a_read_only_cache_never_fails_a_run(tmp_path):
    config = _config(tmp_path)
    (tmp_path / "cache").write_text("a file where the cache directory should be")
    durations.save(config, [SimpleNamespace(nodeid="a", duration=1.0)])  # no exception
    assert durations.load(config) == {}


def test_longest_first_uses_history_then_the_heuristic(tmp_path):
    config = _config(tmp_path)
    items = [_item("compile-only", suite=False), _item("big", small=False), _item("small"),
             _item("known-slow"), _item("known-fast")]
    durations.save(config, [SimpleNamespace(nodeid="known-slow", duration=60.0),
                            SimpleNamespace(nodeid="known-fast", duration=0.1)])
    order = [items[i].nodeid for i in durations.longest_first(config, items)]
    assert order == ["known-slow", "small", "compile-only", "big", "known-fast"]


def test_no_cache_neither_reads_nor_writes_the_history(tmp_path):
    """`--no-cache` ignores the artifact cache: nothing is written under its root, and a history
    already there does not order the run."""
    config = _config(tmp_path)
    durations.save(config, [SimpleNamespace(nodeid="a", duration=5.0)])
    off = SimpleNamespace(rootdir=config.rootdir, command="check",
                          cache=ArtifactCache(tmp_path / "cache", enabled=False))
    assert durations.load(off) == {}
    durations.save(off, [SimpleNamespace(nodeid="b", duration=1.0)])
    assert durations.load(config) == {"a": 5.0}
    fresh = SimpleNamespace(rootdir=config.rootdir, command="check",
                            cache=ArtifactCache(tmp_path / "other", enabled=False))
    durations.save(fresh, [SimpleNamespace(nodeid="c", duration=1.0)])
    assert not (tmp_path / "other").exists()
