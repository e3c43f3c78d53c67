"""Hook specifications for KCoral plugins (pluggy project ``kcoral``, entry-point group
``kcoral``). Declarations only; hooks are called with keyword arguments, and ``check_pending()``
runs at start-up so a misspelled ``kcoral_*`` implementation is an error, not silence.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("kcoral")


# -------------------------------------------------------------------------------------------------
# boards
# -------------------------------------------------------------------------------------------------

@hookspec(historic=True)
def kcoral_register_board_types(registry):
    """Add board types (``cuda``, ``sim``, ``fake``, ...).

    Called once per plugin at start-up (historic: a plugin registered late is called too), both
    in the daemon and in each board's worker process.

    :param registry: a `kcoral.boards.BoardTypeRegistry`; call ``registry.add(board_type)`` with
        an object that has `name`, ``discover(config) -> [BoardSpec]`` (the boards of this type
        on this host, from the ``[boards.<type>]`` table of ``kcoral.toml``) and
        ``open_device(spec) -> Device`` (called inside the worker process only).
    """


# -------------------------------------------------------------------------------------------------
# measurement
# -------------------------------------------------------------------------------------------------

@hookspec(historic=True)
def kcoral_register_baselines(registry):
    """Add baselines (reference implementations timed side by side, or used as references).

    Called at start-up in the daemon and in each worker (historic). Register a baseline only when
    its package imports (``torch``, ``fla``), so an operator installs exactly what they offer.

    :param registry: a `kcoral.baselines.BaselineRegistry`; ``registry.add(baseline, owner=...)``.
    """


@hookspec(historic=True)
def kcoral_register_tools(registry):
    """Add tools (profilers, checkers) that jobs may name in ``tools: [...]`` (historic).

    :param registry: a `kcoral.tools.ToolRegistry`; ``registry.add(tool, owner=...)`` with an
        object implementing the interface in `kcoral.tools` (`name`, ``available(board)``,
        ``run(job, workdir) -> ToolResult``).
    """
