"""The TIRx language implementation (public surface: `tirxh.lang`)."""
