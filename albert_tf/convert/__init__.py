"""Checkpoint conversion: rename tables and named shape transforms kept as data."""
