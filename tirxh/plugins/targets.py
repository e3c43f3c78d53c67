"""Built-in targets: sm_80 (Ampere), sm_90a (Hopper), sm_100a (Blackwell), sm_110a (Jetson Thor).

Limits are per block / per SM as the CUDA programming guide's compute-capability table gives them;
validation uses them before a launch is attempted.
"""

from tirxh.core.pluginmanager import hookimpl
from tirxh.core.targets import Target

_COMMON = {"max_threads_per_block": 1024, "max_registers_per_thread": 255, "warp_size": 32}

TARGETS = (
    Target("sm_80", 80, (8, 0), ("base", "sm80"),
           dict(_COMMON, max_smem_per_block=166912, max_cluster_size=1),
           "NVIDIA Ampere (A100): cp.async, ldmatrix, mma.sync"),
    Target("sm_90a", 90, (8, 4), ("base", "sm80", "sm90", "sm90a"),
           dict(_COMMON, max_smem_per_block=232448, max_cluster_size=8),
           "NVIDIA Hopper (H100/H200), arch-specific: wgmma, TMA, setmaxnreg"),
    Target("sm_100a", 100, (8, 7), ("base", "sm80", "sm90", "sm100a"),
           dict(_COMMON, max_smem_per_block=232448, max_cluster_size=8),
           "NVIDIA Blackwell datacenter (B200), arch-specific: tcgen05"),
    Target("sm_110a", 110, (9, 0), ("base", "sm80", "sm90", "sm100a"),
           dict(_COMMON, max_smem_per_block=232448, max_cluster_size=8),
           "NVIDIA Jetson Thor, arch-specific: tcgen05"),
)


@hookimpl
def tirxh_register_targets(registry):
    for t in TARGETS:
        registry.add(t, owner="tirxh.targets")
