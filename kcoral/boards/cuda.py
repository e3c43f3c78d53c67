"""The ``cuda`` board: one local GPU driven through the cuda-bindings driver API.

Everything runs inside the board's worker process on the device's *primary* context (which torch
shares, so torch baselines can alias the job's buffers) and on the legacy default stream, so the
events that bracket a launch also bracket a baseline's torch ops. What it does, driver call by
driver call:

- module: ``cuModuleLoadData`` (cubin, or NUL-terminated PTX JIT-compiled by the driver),
  ``cuModuleGetFunction`` per entry; > 48 KiB of dynamic shared memory needs
  ``cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)``; clusters > 8 CTAs need
  ``NON_PORTABLE_CLUSTER_SIZE_ALLOWED``.
- launch: ``cuLaunchKernelEx`` with a cluster-dimension attribute when the launch has a cluster
  and the programmatic-stream-serialization attribute when it is a programmatic dependent
  launch (``pdl``: the kernel executes ``griddepcontrol.wait``);
  parameters are packed per ``launch_metadata()["params"]`` (`pack_params`): a pointer is the
  8-byte device address, a scalar its value in its dtype, a tensor map the 128-byte
  ``CUtensorMap`` from ``cuTensorMapEncodeTiled`` by value.
- timing: an L2 flush over a buffer of 2x the L2 size (`kcoral.boards.l2_flush`: by writing,
  ``cuMemsetD32Async``, or by reading, a read-only sweep kernel), then
  ``cuEventRecord``/launch/``cuEventRecord``; elapsed times read after one sync per batch. A
  gated batch (`kcoral.boards.launch_gate`) first enqueues ``cuStreamWaitValue32`` on a mapped
  host word and writes the word once the whole batch is enqueued.
- faults: a sticky error from ``cuCtxSynchronize`` (illegal address, trap, misaligned address)
  poisons the context; it is reported as ``runtime.*`` with ``fatal`` so the worker restarts.
"""

from __future__ import annotations

import ctypes
import math
import os

import numpy as np

from kcoral.boards import BoardSpec, Device
from kcoral.boards.l2_flush import L2Flush, flush_mode
from kcoral.boards.launch_gate import LaunchGate
from kcoral.clocks import NvmlClock
from kcoral.dtypes import dtype_of
from kcoral.errors import JobFailure
from kcoral.peaks import peak_info
from kcoral.plugins import hookimpl

# sticky errors: the context is unusable afterwards (CUDA driver API, CUresult)
_RUNTIME_ERRORS = {
    700: "runtime.illegal-address", 710: "runtime.assert", 714: "runtime.hardware-stack-error",
    715: "runtime.illegal-instruction", 716: "runtime.misaligned-address",
    717: "runtime.invalid-address-space", 718: "runtime.invalid-pc", 719: "runtime.launch-failed",
    702: "runtime.launch-timeout", 720: "runtime.cooperative-launch-too-large",
}

_TMA_DTYPES = {  # PTX type name -> CUtensorMapDataType member suffix
    "u8": "UINT8", "s8": "UINT8", "b8": "UINT8", "e4m3": "UINT8", "e5m2": "UINT8",
    "u16": "UINT16", "b16": "UINT16", "s16": "UINT16", "u32": "UINT32", "b32": "UINT32",
    "s32": "INT32", "u64": "UINT64", "b64": "UINT64", "s64": "INT64",
    "f16": "FLOAT16", "bf16": "BFLOAT16", "f32": "FLOAT32", "f64": "FLOAT64", "tf32": "TFLOAT32",
}
_SWIZZLE = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_L2PROMO = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}


def pack_params(params: list, args: list, pointer_of, tensormap_bytes) -> list:
    """Pack launch arguments into the bytes of each kernel parameter (pure; tested on the CPU).

    params: ``launch_metadata()["params"]`` (name, kind, dtype, size, align) or None when the job
    does not carry them (then sizes follow the arguments); args: the launch's args;
    pointer_of(buffer_name) -> int device address; tensormap_bytes(describe_dict) -> 128 bytes.
    """
    if params is not None and len(params) != len(args):
        raise JobFailure("launch.args", f"the kernel takes {len(params)} parameters "
                         f"({', '.join(p['name'] for p in params)}), the launch passes "
                         f"{len(args)}")
    out = []
    for i, a in enumerate(args):
        p = params[i] if params is not None else None
        where = f"args[{i}]" + (f" ({p['name']})" if p else "")
        if "buffer" in a:
            if p is not None and p["kind"] != "ptr":
                raise JobFailure("launch.args", f"{where}: the kernel expects a {p['kind']}, "
                                 f"the launch passes buffer {a['buffer']!r}")
            out.append(int(pointer_of(a["buffer"])).to_bytes(8, "little"))
        elif "scalar" in a:
            dt = dtype_of(a.get("dtype") or (p and p["dtype"]))
            if p is not None and p["kind"] != "scalar":
                raise JobFailure("launch.args", f"{where}: the kernel expects a {p['kind']}, "
                                 f"the launch passes a scalar")
            v = np.array(a["scalar"]).astype(dt)
            if dt.kind in "iu" and int(v) != a["scalar"]:
                raise JobFailure("launch.args", f"{where}: {a['scalar']!r} does not fit in "
                                 f"{a.get('dtype')}")
            b = v.tobytes()
            if p is not None and len(b) != p["size"]:
                raise JobFailure("launch.args", f"{where}: {len(b)}-byte value for a "
                                 f"{p['size']}-byte parameter ({p['dtype']})")
            out.append(b)
        elif "tensormap" in a:
            if p is not None and p["kind"] != "tensormap":
                raise JobFailure("launch.args", f"{where}: the kernel expects a {p['kind']}, "
                                 f"the launch passes a tensor map")
            b = tensormap_bytes(a["tensormap"])
            if len(b) != 128:
                raise JobFailure("launch.tensormap", f"{where}: CUtensorMap is {len(b)} bytes")
            out.append(b)
        else:
            raise JobFailure("launch.args", f"{where}: unknown argument {a!r}")
    return out


def tensormap_args(desc: dict) -> dict:
    """The arguments of ``cuTensorMapEncodeTiled`` for a ``TensorMap.describe()`` dict, as plain
    ints and enum-member suffixes (pure, so it is tested on the CPU).

    The driver API wants ``globalStrides`` for the ``tensorRank - 1`` outer dimensions (bytes,
    each a multiple of 16 and below 2**40). For rank 1 that is no stride at all, and
    ``describe()`` gives ``[]``; but cuda-bindings hands an empty list to the driver as no array
    at all, which it rejects with CUDA_ERROR_INVALID_VALUE (seen on an H200 on 2026-11-30: a
    rank-1 u32 map of 32 elements). A rank-1 map therefore gets one well-formed stride that
    addresses nothing: the row's bytes rounded up to a multiple of 16. Everything else is
    checked against the documented requirements, so that a bad map names its field here
    instead of coming back from the driver as error 1.
    """
    src = desc.get("source")
    where = f"tensor map of {src!r}"
    try:
        dims = [int(d) for d in desc["dims"]]
        strides = [int(s) for s in desc["strides"]]
        box = [int(b) for b in desc["box"]]
        elem = [int(e) for e in desc.get("elem_strides") or [1] * len(dims)]
        dt = _TMA_DTYPES[desc["dtype"]]
        sw = _SWIZZLE[int(desc.get("swizzle", 0))]
        l2 = _L2PROMO[int(desc.get("l2_promotion", 0))]
    except KeyError as e:
        raise JobFailure("launch.tensormap", f"{where}: missing or unsupported "
                         f"{e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise JobFailure("launch.tensormap", f"{where}: {e}") from None
    oob = {"zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}.get(desc.get("oob_fill", "zero"))
    if oob is None:
        raise JobFailure("launch.tensormap", f"{where}: oob_fill {desc.get('oob_fill')!r} is "
                         f"not 'zero' or 'nan'")
    rank = len(dims)
    problems = []
    if not 1 <= rank <= 5:
        problems.append(f"rank {rank} (dims {dims}) is not 1..5")
    if len(strides) != max(rank - 1, 0):
        problems.append(f"strides {strides} should have rank - 1 = {rank - 1} entries")
    if len(box) != rank:
        problems.append(f"box {box} should have {rank} entries")
    if len(elem) != rank:
        problems.append(f"elem_strides {elem} should have {rank} entries")
    bad = [s for s in strides if s % 16 or not 0 < s < 1 << 40]
    if bad:
        problems.append(f"strides {bad} are not positive multiples of 16 below 2**40")
    if problems:
        raise JobFailure("launch.tensormap", f"{where}: " + "; ".join(problems))
    if rank == 1:
        row = dims[0] * dtype_of(desc["dtype"]).itemsize
        strides = [max(16, -(-row // 16) * 16)]
    return {"dtype": dt, "rank": rank, "dims": dims, "strides": strides, "box": box,
            "elem_strides": elem, "swizzle": sw, "l2_promotion": l2, "oob_fill": oob}


class _ParamBlock:
    """Keeps packed parameters alive and exposes the ``void**`` array cuLaunchKernelEx reads.
    Each parameter gets its own 128-byte-aligned buffer (a CUtensorMap must be 64-aligned)."""

    def __init__(self, packed: list):
        self._bufs = []
        self.array = (ctypes.c_void_p * max(len(packed), 1))()
        for i, b in enumerate(packed):
            raw = ctypes.create_string_buffer(len(b) + 128)
            addr = (ctypes.addressof(raw) + 127) & ~127
            ctypes.memmove(addr, b, len(b))
            self._bufs.append(raw)
            self.array[i] = addr

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)


def target_for(major: int, minor: int) -> str:
    if (major, minor) == (9, 0):
        return "sm_90a"
    if major in (10, 11, 12) and minor == 0:
        return f"sm_{major}{minor}a"
    return f"sm_{major}{minor}"


class CudaDevice(Device):
    kind = "cuda"

    def __init__(self, spec: BoardSpec):
        from cuda.bindings import driver as cu  # optional dependency: only a GPU host needs it
        self.cu = cu
        self.spec = spec
        self._check(cu.cuInit(0), "cuInit")
        self.dev = self._check(cu.cuDeviceGet(int(spec.options.get("ordinal", 0))),
                               "cuDeviceGet")
        self.ctx = self._check(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._check(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.stream = cu.CUstream(0)
        self.ptrs: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.funcs: dict = {}
        self.module = None
        self._info = self._query()
        self.l2 = self._info["l2_bytes"]
        self._flush = L2Flush(cu, self._check, self.stream, self.l2, self._info["sm_count"])
        self._events: list = []
        self._launch_gate: "LaunchGate | None" = None
        self._gate_error = ""
        try:  # NVML finds the device by its PCI bus id (its order is not CUDA's)
            bus = self._check(cu.cuDeviceGetPCIBusId(32, self.dev), "cuDeviceGetPCIBusId")
            bus = bus.split(b"\0")[0].decode() if isinstance(bus, bytes) else str(bus)
        except Exception:  # JobFailure, or a cuda-bindings that spells the call otherwise:
            bus = None     # NVML's index is used (kcoral/clocks.py says so)
        self.clock = NvmlClock(bus, int(spec.options.get("ordinal", 0)))
        self.clock_note = self.clock.note  # why there are no clock readings ("" when there are)
        full = self.clock.max_sm()
        if full:  # NVML's maximum SM clock is the full clock of the regime split
            self._info["max_clock_mhz"] = full

    # --- errors -------------------------------------------------------------------------------
    def _check(self, res, what: str, kind: str = "launch"):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if int(err) != 0:
            code = int(err)
            name = self.cu.cuGetErrorName(err)[1]
            name = name.decode() if isinstance(name, bytes) else str(name)
            if code in _RUNTIME_ERRORS:
                raise JobFailure(_RUNTIME_ERRORS[code], f"{what}: {name} ({code}); the "
                                 f"context is unusable and the worker will be restarted",
                                 fatal=True)
            raise JobFailure(f"{kind}.{name.lower().replace('cuda_error_', '')}",
                             f"{what}: {name} ({code})")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def _attr(self, name: str) -> int:
        a = getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(self._check(self.cu.cuDeviceGetAttribute(a, self.dev), name))

    def _query(self) -> dict:
        cu = self.cu
        name = self._check(cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        name = name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name)
        major, minor = (self._attr("COMPUTE_CAPABILITY_MAJOR"),
                        self._attr("COMPUTE_CAPABILITY_MINOR"))
        return {"name": name, "kind": "cuda", "ordinal": int(self.spec.options.get("ordinal", 0)),
                "compute_capability": f"{major}.{minor}", "target": target_for(major, minor),
                "driver": int(self._check(cu.cuDriverGetVersion(), "cuDriverGetVersion")),
                "sm_count": self._attr("MULTIPROCESSOR_COUNT"),
                "max_clock_mhz": self._attr("CLOCK_RATE") / 1000.0,
                "l2_bytes": self._attr("L2_CACHE_SIZE"),
                "memory_bytes": int(self._check(cu.cuDeviceTotalMem(self.dev), "cuDeviceTotalMem")),
                "max_smem_optin": self._attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
                # the floor's figures from kcoral's per-device table (or none, said so)
                **peak_info(name, self.spec.options)}

    def info(self) -> dict:
        return dict(self._info)

    # --- module -------------------------------------------------------------------------------
    def load(self, module: bytes, fmt: str, entries: list) -> None:
        cu = self.cu
        if self.module is not None:
            self._check(cu.cuModuleUnload(self.module), "cuModuleUnload")
            self.module, self.funcs = None, {}
        if fmt == "ptx":
            module = module.rstrip(b"\0") + b"\0"
        elif fmt != "cubin":
            raise JobFailure("compile.format", f"the cuda board loads 'cubin' or 'ptx', not "
                             f"{fmt!r}")
        self.module = self._check(cu.cuModuleLoadData(module), "cuModuleLoadData", "compile")
        for e in entries:
            self.funcs[e] = self._check(cu.cuModuleGetFunction(self.module, e.encode()),
                                        f"cuModuleGetFunction({e!r})", "compile")

    # --- memory -------------------------------------------------------------------------------
    def alloc(self, name, nbytes):
        self.ptrs[name] = int(self._check(self.cu.cuMemAlloc(max(nbytes, 1)),
                                          f"cuMemAlloc({name!r}, {nbytes})", "launch"))
        self.sizes[name] = nbytes

    def write(self, name, array):
        a = np.ascontiguousarray(array)
        if a.nbytes:
            self._check(self.cu.cuMemcpyHtoD(self.ptrs[name], a.ctypes.data, a.nbytes),
                        f"cuMemcpyHtoD({name!r})", "runtime")

    def read(self, name, dtype, shape):
        out = np.empty(shape, dtype)
        if out.nbytes:
            self._check(self.cu.cuMemcpyDtoH(out.ctypes.data, self.ptrs[name], out.nbytes),
                        f"cuMemcpyDtoH({name!r})", "runtime")
        return out

    def poison(self, name, itemsize, is_float):
        # all-ones bits: NaN for every float width, -1 / max for integers
        self._check(self.cu.cuMemsetD8(self.ptrs[name], 0xFF, self.sizes[name]),
                    f"cuMemsetD8({name!r})", "runtime")

    def buffer_handle(self, name):
        return self.ptrs[name]

    def torch_tensor(self, name, dtype, shape, torch):
        """A torch tensor aliasing buffer `name` (primary context, so torch sees the pointer)."""
        dtype = np.dtype(dtype)
        special = {"bfloat16": ("<i2", torch.bfloat16), "float8_e4m3fn": ("|u1",
                   torch.float8_e4m3fn), "float8_e5m2": ("|u1", torch.float8_e5m2)}
        typestr, view = special.get(dtype.name, (dtype.str, None))

        class _Cai:
            __cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                        "data": (self.ptrs[name], False), "version": 3,
                                        "strides": None}
        t = torch.as_tensor(_Cai(), device=f"cuda:{self._info['ordinal']}")
        return t.view(view) if view is not None else t

    def free_all(self):
        for p in self.ptrs.values():
            self.cu.cuMemFree(p)
        self.ptrs.clear()
        self.sizes.clear()

    # --- launch -------------------------------------------------------------------------------
    def _tensormap(self, desc: dict) -> bytes:
        cu = self.cu
        src = desc.get("source")
        if src not in self.ptrs:
            raise JobFailure("launch.tensormap", f"tensor map source {src!r} is not a buffer")
        a = tensormap_args(desc)
        try:
            dt = getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{a['dtype']}")
            sw = getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{a['swizzle']}")
            l2 = getattr(cu.CUtensorMapL2promotion,
                         f"CU_TENSOR_MAP_L2_PROMOTION_{a['l2_promotion']}")
            oob = getattr(cu.CUtensorMapFloatOOBfill,
                          f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{a['oob_fill']}")
        except AttributeError as e:
            raise JobFailure("launch.tensormap", f"tensor map of {src!r}: this cuda-bindings has "
                             f"no {e.args[0]}") from None
        tm = self._check(cu.cuTensorMapEncodeTiled(
            dt, a["rank"], self.ptrs[src], [cu.cuuint64_t(d) for d in a["dims"]],
            [cu.cuuint64_t(s) for s in a["strides"]],
            [cu.cuuint32_t(b) for b in a["box"]],
            [cu.cuuint32_t(s) for s in a["elem_strides"]],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, sw, l2, oob),
            f"cuTensorMapEncodeTiled({src!r}, dims {a['dims']}, strides {a['strides']}, "
            f"box {a['box']})")
        return ctypes.string_at(tm.getPtr(), 128)

    def launcher(self, launch: dict, doc: dict):
        cu = self.cu
        f = self.funcs[launch["entry"]]
        smem = int(launch.get("dynamic_smem", 0))
        if smem > 48 * 1024:
            self._check(cu.cuFuncSetAttribute(
                f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        packed = pack_params(launch.get("params"), launch["args"], self.ptrs.__getitem__,
                             self._tensormap)
        block = _ParamBlock(packed)
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = launch["grid"]
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = launch["block"]
        cfg.sharedMemBytes = smem
        cfg.hStream = self.stream
        attrs = []
        cl = launch.get("cluster")
        if cl and math.prod(cl) > 1:
            if math.prod(cl) > 8:
                self._check(cu.cuFuncSetAttribute(
                    f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1), "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cl
            attrs.append(attr)
        if launch.get("pdl"):
            # programmatic dependent launch (sm_90+): may overlap the previous kernel in the
            # stream; the kernel's griddepcontrol.wait orders its reads after that kernel
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            attrs.append(attr)
        if attrs:
            cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        what = f"cuLaunchKernelEx({launch['entry']!r}, grid {launch['grid']})"

        def run():
            self._check(cu.cuLaunchKernelEx(cfg, f, block.address, 0), what)
        run._keep = (block, cfg)
        return run

    # --- sync and timing ----------------------------------------------------------------------
    def sync(self):
        self._check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize", "runtime")

    def profiler_range(self, on: bool) -> None:
        """``cuProfilerStart`` / ``cuProfilerStop``: the range ncu captures under
        ``--profile-from-start off`` (`Device.profiler_range`)."""
        call = "cuProfilerStart" if on else "cuProfilerStop"
        self._check(getattr(self.cu, call)(), call, "runtime")

    def _event_pairs(self, n):
        cu = self.cu
        while len(self._events) < n:
            a = self._check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
            b = self._check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
            self._events.append((a, b))
        return self._events[:n]

    def timed_batch(self, fns, l2_flush, gate=False):
        """`l2_flush` is a mode of `kcoral.boards.l2_flush` (``write``, ``read``; True is
        ``write``, falsy none). With `gate`, the round's work waits behind a `LaunchGate`
        until all of it is enqueued, so host launch overhead between the events is not timed
        (`last_gate` says whether it was: ``gated``, ``late`` when the gate's watcher had to
        open it, or ``unavailable: why``)."""
        cu = self.cu
        mode = flush_mode(l2_flush)
        evs = self._event_pairs(len(fns))

        def enqueue():
            for fn, (a, b) in zip(fns, evs):
                if mode:
                    self._flush.sweep(mode)
                self._check(cu.cuEventRecord(a, self.stream), "cuEventRecord")
                fn()
                self._check(cu.cuEventRecord(b, self.stream), "cuEventRecord")
        self._held(enqueue, gate)
        self._check(cu.cuEventSynchronize(evs[-1][1]), "cuEventSynchronize", "runtime")
        return [float(self._check(cu.cuEventElapsedTime(a, b), "cuEventElapsedTime"))
                for a, b in evs]

    def timed_split(self, fns, l2_flush):
        """One sample of several launches in a row (a plan's), after one flush, with an event
        between every two: each launch's ms, behind the launch gate when there is one."""
        cu = self.cu
        mode = flush_mode(l2_flush)
        pairs = self._event_pairs(-(-(len(fns) + 1) // 2))
        evs = [e for pair in pairs for e in pair][:len(fns) + 1]

        def enqueue():
            if mode:
                self._flush.sweep(mode)
            self._check(cu.cuEventRecord(evs[0], self.stream), "cuEventRecord")
            for fn, e in zip(fns, evs[1:]):
                fn()
                self._check(cu.cuEventRecord(e, self.stream), "cuEventRecord")
        self._held(enqueue, True)
        self._check(cu.cuEventSynchronize(evs[-1]), "cuEventSynchronize", "runtime")
        return [float(self._check(cu.cuEventElapsedTime(a, b), "cuEventElapsedTime"))
                for a, b in zip(evs, evs[1:])]

    def _held(self, enqueue, gate: bool) -> None:
        """`enqueue()` behind the launch gate when `gate` (and the board has one), and
        `last_gate` set to how it went."""
        held = self._gate() if gate else None
        if held is not None:
            held.close()
        try:
            enqueue()
        finally:
            if held is not None:
                held.open()  # even on an error: never leave the stream waiting
        if held is not None:
            self.last_gate = "late" if held.late else "gated"
        else:
            self.last_gate = f"unavailable: {self._gate_error}" if gate else "off"

    def _gate(self) -> "LaunchGate | None":
        """The device's launch gate, made on first use; None (and `_gate_error`) when the
        driver refuses stream memory operations on mapped host memory."""
        if self._launch_gate is None and not self._gate_error:
            try:
                self._launch_gate = LaunchGate(self.cu, self._check, self.stream)
            except JobFailure as e:
                self._gate_error = e.message
        return self._launch_gate

    def sm_clock_mhz(self):
        return self.clock.sm()

    def clock_reasons(self):
        return self.clock.reasons()

    def close(self):
        try:
            if self._launch_gate is not None:
                self._launch_gate.free()
            self.free_all()
            self._flush.free()
            self.cu.cuDevicePrimaryCtxRelease(self.dev)
        except Exception:
            pass


def gpu_count() -> "tuple[int, str]":
    """(number of GPUs, reason when zero); initializes the driver in this process."""
    try:
        from cuda.bindings import driver as cu  # optional dependency: absent -> no cuda boards
    except ImportError as e:
        return 0, f"cuda-bindings is not importable: {e}"
    try:
        err = cu.cuInit(0)[0]
        if int(err) != 0:
            return 0, f"cuInit failed: {cu.cuGetErrorName(err)[1]!r} (no driver or no GPU)"
        err, n = cu.cuDeviceGetCount()
    except Exception as e:  # the driver library itself is missing (a CPU-only machine)
        return 0, f"no NVIDIA driver ({type(e).__name__}: {str(e)[:120]})"
    return int(n), "" if n else "the driver reports no GPU"


class CudaBoardType:
    """Boards from the local GPUs: ``[boards.cuda] devices = [0, 1]`` (default: all)."""

    name = "cuda"

    def discover(self, config: dict) -> list:
        if not config.get("enabled", True):
            return []
        n, why = gpu_count()
        if n == 0:
            return []
        from cuda.bindings import driver as cu  # optional dependency (gpu_count found it)
        out = []
        for i in config.get("devices", range(n)):
            dev = cu.cuDeviceGet(i)[1]
            name = cu.cuDeviceGetName(256, dev)[1].split(b"\0")[0].decode()
            ga = cu.CUdevice_attribute
            major = int(cu.cuDeviceGetAttribute(ga.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                                dev)[1])
            minor = int(cu.cuDeviceGetAttribute(ga.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                                dev)[1])
            smem = int(cu.cuDeviceGetAttribute(
                ga.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)[1])
            mem = int(cu.cuDeviceTotalMem(dev)[1])
            out.append(BoardSpec(
                name=f"cuda{i}", type="cuda", target=config.get("target",
                                                                target_for(major, minor)),
                tags=list(config.get("tags", [])) + [name.replace(" ", "-")],
                properties={"device": name, "compute_capability": f"{major}.{minor}",
                            "memory_bytes": mem, "pid": os.getpid()},
                limits={"memory_bytes": int(mem * 0.9), "max_smem_per_block": smem,
                        "max_threads_per_block": 1024, "max_cluster_size": 16},
                options={"ordinal": i, **{k: config[k] for k in ("peak_flops_per_s",
                                                                 "peak_bytes_per_s",
                                                                 "peak_fp8_flops_per_s")
                                          if k in config}}))
        return out

    def open_device(self, spec):
        return CudaDevice(spec)


@hookimpl
def kcoral_register_board_types(registry):
    registry.add(CudaBoardType())
