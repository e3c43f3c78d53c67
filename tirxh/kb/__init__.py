"""The knowledge base for people and coding agents: the kernel zoo (`tirxh.kb.zoo`) and how to
copy a zoo kernel into a project (`tirxh.kb.zoocopy`). The command over them (``tirxh zoo``) is
the built-in plugin `tirxh.plugins.kb_zoo`; this package holds the substance and prints nothing.
"""
