"""Generated from proto/kcoral.proto; do not edit (python -m kcoral._proto.regen)."""
