"""``python -m tirxh``: the same as the ``tirxh`` console script."""

import sys

from tirxh.core.cli import main

if __name__ == "__main__":
    sys.exit(main())
