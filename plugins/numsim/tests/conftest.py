"""numsim test configuration (the ``gpu`` marker is `tirxh.testing`'s)."""
