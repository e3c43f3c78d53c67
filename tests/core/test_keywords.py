import pytest

from tirxh.core.errors import UsageError
from tirxh.core.keywords import compile_expression

NAMES = ["vadd.py", "kernels/vadd.py", "vadd", "sm_90a", "vadd[small]@sm_90a", "small"]


@pytest.mark.parametrize("expr, expected", [
    ("", True),
    ("vadd", True),
    ("VADD", True),  # case-insensitive
    ("gemm", False),
    ("vadd and small", True),
    ("vadd and big", False),
    ("gemm or small", True),
    ("not big", True),
    ("not not big", False),
    ("vadd and not (big or sm_80)", True),
    ("(gemm or vadd) and sm_90", True),
    ("vadd[small]", True),
    ("sm_100a", False),
])
def test_expressions(expr, expected):
    assert compile_expression(expr)(NAMES) is expected


def test_precedence_not_and_or():
    # "a or b and c" is "a or (b and c)"
    assert compile_expression("vadd or gemm and big")(NAMES) is True
    assert compile_expression("(vadd or gemm) and big")(NAMES) is False


@pytest.mark.parametrize("expr, match", [
    ("vadd and", r"column 9: expected a name, 'not' or '\('; found end of input"),
    ("(vadd", r"expected '\)'; found end of input"),
    ("vadd big", r"column 6: expected 'and', 'or' or the end of the expression; found 'big'"),
    ("and vadd", r"column 1: expected a name"),
    ("vadd )", r"found '\)'"),
])
def test_syntax_errors_name_the_column(expr, match):
    with pytest.raises(UsageError, match=match):
        compile_expression(expr)
