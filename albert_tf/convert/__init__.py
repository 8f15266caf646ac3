"""Checkpoint conversion: rename tables and shape rules kept as data."""
