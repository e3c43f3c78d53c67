"""Copying a zoo kernel: the kernels directory, pruning, renaming, and every refusal."""

from pathlib import Path

import pytest

from tirxh.core.errors import UsageError
from tirxh.kb.zoo import load_zoo
from tirxh.kb.zoocopy import copy_kernel, kernels_dir, prune, rename_identifiers

from .conftest import FACTORY, ODD, PAIR


@pytest.mark.parametrize("globs, expect", [
    (["kernels/*.py"], "kernels"), (["src/k/**/*.py", "x/*.py"], "src/k"), (["*.py"], ""),
    (["k[0-9]/*.py"], ""),
])
def test_kernels_dir_is_the_first_globs_directory(tmp_path, globs, expect):
    assert kernels_dir(tmp_path, globs) == tmp_path / expect


def test_kernels_dir_needs_a_glob(tmp_path):
    with pytest.raises(UsageError, match=r"\[project\] kernels is empty"):
        kernels_dir(tmp_path, [])


def test_rename_touches_identifiers_only():
    src = ('relu = 1  # relu stays in comments\n'
           'x = "relu" + other.relu + relu_inputs\n'
           'def f(relu=relu):\n    return relu\n')
    out = rename_identifiers(src, {"relu": "act", "relu_inputs": "act_inputs"})
    assert out == ('act = 1  # relu stays in comments\n'
                   'x = "relu" + other.relu + act_inputs\n'
                   'def f(act=act):\n    return act\n')


def test_prune_keeps_one_kernel_and_what_it_uses(make_zoo):
    zoo = load_zoo(make_zoo(pair=PAIR))
    square = zoo.find("square")
    text, removed = prune(square.module.path.read_text(), square)
    assert removed == ["RELU", "relu"]
    assert "def relu" not in text and "RELU =" not in text and "def square" in text
    assert "def load" in text and "def inputs" in text  # shared helpers stay
    assert "\n\n\n\n" not in text
    text, removed = prune(zoo.find("relu").module.path.read_text(), zoo.find("relu"))
    assert removed == ["SQUARE", "square", "square_of"]  # square_of: only square used it
    assert "# squares its input" not in text  # its comment went with it


def _copy(zoo_root, name, new, dest, **kw):
    zoo = load_zoo(zoo_root)
    return copy_kernel(zoo.find(name), new, dest, lambda: list(dest.glob("*.py")), **kw)


def test_copy_renames_kernel_and_suite_and_imports(make_zoo, tmp_path):
    dest = tmp_path / "proj" / "kernels"
    c = _copy(make_zoo(pair=PAIR), "relu", "my_relu", dest, stamp="tirxh 0.1.0")
    assert c.path == dest / "my_relu.py"
    assert c.renamed == {"relu": "my_relu", "RELU": "MY_RELU"}
    assert c.removed == ["SQUARE", "square", "square_of"]
    text = c.path.read_text()
    assert text.startswith("# From the tirxh zoo: kernels/pair.py::relu, renamed to my_relu by "
                           "`tirxh zoo new` (tirxh 0.1.0).\n\"\"\"Two activations")
    assert "def my_relu(" in text and "MY_RELU = T.suite(my_relu," in text
    assert c.to_json(tmp_path / "proj")["next"] == "tirxh check kernels/my_relu.py"


def test_copy_of_a_suite_named_generically_keeps_it(tmp_path):
    dest = tmp_path / "kernels"
    zoo_root = Path(__file__).resolve().parents[2] / "zoo"
    c = _copy(zoo_root, "vadd", "vadd2", dest)
    assert c.renamed == {"vadd": "vadd2"} and "SUITE = T.suite(\n    vadd2," in c.path.read_text()


@pytest.mark.parametrize("new, match", [
    ("my-relu", "must be a Python identifier"), ("class", "must be a Python identifier"),
    ("load", "'load' already names something else in kernels/pair.py"),
])
def test_copy_refuses_bad_names(make_zoo, tmp_path, new, match):
    with pytest.raises(UsageError, match=match):
        _copy(make_zoo(pair=PAIR), "relu", new, tmp_path / "k")
    assert not (tmp_path / "k" / f"{new}.py").exists()


def test_copy_refuses_to_overwrite_unless_forced(make_zoo, tmp_path):
    root, dest = make_zoo(pair=PAIR), tmp_path / "k"
    _copy(root, "relu", "act", dest)
    with pytest.raises(UsageError, match=r"act.py: exists; choose another name or pass --force"):
        _copy(root, "relu", "act", dest)
    assert _copy(root, "square", "act", dest, force=True).renamed["square"] == "act"


def test_copy_refuses_zoo_local_imports(make_zoo, tmp_path):
    root = make_zoo(helper="X = 1\n", uses="import helper\n" + ODD.replace('"""Odd', '"""Odd '))
    with pytest.raises(UsageError, match=r"imports 'helper' from the zoo itself "
                                         r"\(kernels/uses.py:1\)"):
        _copy(root, "fill", "f2", tmp_path / "k")


def test_copy_of_a_factory_kernel_renames_its_variable_and_name(make_zoo, tmp_path):
    c = _copy(make_zoo(factory=FACTORY), "triple", "times3", tmp_path / "k")
    assert c.renamed == {"triple": "times3", "TRIPLE": "TIMES3", "TRIPLE_LARGE": "TIMES3_LARGE"}
    assert c.removed == ["DOUBLE", "DOUBLE_LARGE", "double"]  # _make stays: triple uses it
    text = c.path.read_text()
    assert 'times3 = _make("times3", 3.0)' in text
    assert "TIMES3, TIMES3_LARGE = _suites(times3, 3)" in text
    assert "double" not in text.replace("# From", "")


def test_rename_of_string_literals_is_exact():
    src = 'a = ("k", "k2", f"{k}", \'k\', b"k")\n'
    assert rename_identifiers(src, {}, {"k": "new"}) == \
        'a = ("new", "k2", f"{k}", \'new\', b"k")\n'


def test_a_copy_that_would_not_be_collected_is_removed(make_zoo, tmp_path):
    zoo = load_zoo(make_zoo(pair=PAIR))
    dest = tmp_path / "elsewhere"
    with pytest.raises(UsageError, match=r"\[project\] kernels does not match this file"):
        copy_kernel(zoo.find("relu"), "act", dest, lambda: [])
    assert not (dest / "act.py").exists()
