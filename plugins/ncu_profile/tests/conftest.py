import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # tirxh_ncu_profile without installing the distribution
sys.path.insert(0, str(HERE))  # ncu_fakes


@pytest.fixture
def fixtures():
    return HERE / "fixtures"


@pytest.fixture
def read(fixtures):
    return lambda name: (fixtures / name).read_text()
