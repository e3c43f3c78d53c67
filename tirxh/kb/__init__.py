"""The knowledge base for people and coding agents: the kernel zoo (`tirxh.kb.zoo`), how to copy
a zoo kernel into a project (`tirxh.kb.zoocopy`) and the instruction facts of every loaded binding
(`tirxh.kb.ptxinfo`). The commands over them (``tirxh zoo``, ``tirxh ptx``) are the built-in
plugins `tirxh.plugins.kb_zoo` and `tirxh.plugins.kb_ptx`; this package holds the substance and
prints nothing.
"""
