import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # tracegen
sys.path.insert(0, os.path.dirname(HERE))  # tirxh_iket without installing the distribution


@pytest.fixture
def gemm_layout():
    from tirxh_iket.layout import Site, TraceLayout
    f = "/zoo/kernels/gemm_ws.py"
    sites = [Site("begin", "load", f, 40), Site("end", "load", f, 40),
             Site("begin", "mma", f, 52), Site("end", "mma", f, 52),
             Site("begin", "epilogue", f, 60), Site("end", "epilogue", f, 60),
             Site("mark", "tile_done", f, 66)]
    return TraceLayout(kernel="gemm_ws", capacity=64, warps_per_cta=12, block=(384, 1, 1),
                       sites=sites)
