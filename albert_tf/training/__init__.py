"""Training: the one driver every command runs through, and what it uses; one module a role."""
