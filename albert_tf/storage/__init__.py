"""Writing and reading that every room shares (files, outputs, atomic, json_files, report,
checkpoints, weights_file, provenance); it imports no other albert_tf room. One line a
module: docs/layout.md."""
