"""The kernel zoo, installed with tirxh as the package ``tirxh.zoo`` (``tirxh zoo list``).

Only data for the package: the zoo is a tirx.toml project whose kernel modules are collected by
path (``tirxh check --rootdir zoo``), never imported through this package.
"""
