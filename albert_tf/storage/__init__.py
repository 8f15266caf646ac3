"""Writing and reading that every room shares; it imports no other albert_tf room."""
