"""tirxh-mcp: ``tirxh mcp`` serves tirxh to coding agents over the Model Context Protocol.

`tirxh_mcp.plugin` adds the command (a tirxh plugin, loaded through the ``tirxh`` entry-point
group); `tirxh_mcp.server` builds the server on the official ``mcp`` SDK; `tirxh_mcp.tools`
declares the tools and the ``tirxh`` command line each one runs.
"""
