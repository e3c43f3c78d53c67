"""Regenerate ``kcoral/_proto`` from ``proto/kcoral.proto`` (``python -m kcoral._proto.regen``).

Pinned to grpcio-tools <= 1.84 because generated code refuses to import with a grpcio older than
the generator, and the GPU hosts run grpcio 1.84. The import in the generated ``*_grpc.py`` is
rewritten to a package-relative one so the package can live anywhere.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto" / "kcoral.proto"
MAX_TOOLS = (1, 84)


def generate(out_dir: pathlib.Path) -> list:
    """Run protoc into `out_dir`; return the generated file paths."""
    import grpc_tools
    from grpc_tools import protoc
    ver = tuple(int(x) for x in grpc_tools.__version__.split(".")[:2]) \
        if hasattr(grpc_tools, "__version__") else _tools_version()
    if ver > MAX_TOOLS:
        raise SystemExit(f"grpcio-tools {ver} is newer than {MAX_TOOLS}: code it generates will "
                         f"not import with grpcio 1.84; pip install 'grpcio-tools<=1.84'")
    out_dir.mkdir(parents=True, exist_ok=True)
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    rc = protoc.main(["protoc", f"-I{PROTO.parent}", f"-I{include}", f"--python_out={out_dir}",
                      f"--grpc_python_out={out_dir}", str(PROTO)])
    if rc != 0:
        raise SystemExit(f"protoc failed ({rc}) on {PROTO}")
    grpc_file = out_dir / "kcoral_pb2_grpc.py"
    text = grpc_file.read_text()
    grpc_file.write_text(text.replace("import kcoral_pb2 as kcoral__pb2",
                                      "from . import kcoral_pb2 as kcoral__pb2"))
    return [out_dir / "kcoral_pb2.py", grpc_file]


def _tools_version() -> tuple:
    from importlib import metadata
    return tuple(int(x) for x in metadata.version("grpcio-tools").split(".")[:2])


if __name__ == "__main__":
    for p in generate(pathlib.Path(__file__).resolve().parent):
        print(p)
    sys.exit(0)
