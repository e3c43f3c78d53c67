"""setuptools shim: ships the kernel zoo (the tirx.toml project in zoo/) as the package tirxh.zoo.

pyproject.toml's ``packages.find`` only finds directories below their own names, and the zoo
stays at zoo/ (``tirxh check --rootdir zoo`` and the zoo's own paths depend on it); the mapping
``tirxh.zoo -> zoo`` is in pyproject.toml (``package-dir``, ``package-data``), the package list
that includes it is here. So an installed tirxh finds its zoo outside a checkout
(``tirxh zoo list``), editable installs included.
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["tirxh", "tirxh.*", "kcoral", "kcoral.*"]) + ["tirxh.zoo"])
