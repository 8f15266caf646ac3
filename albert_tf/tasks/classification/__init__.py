"""Sentence(-pair) classification and regression (GLUE, TSV files): one module per role."""
