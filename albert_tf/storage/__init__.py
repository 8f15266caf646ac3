"""Writing and reading that every room shares: atomic output (`atomic`), the
checkpoint-matching report (`report`) and checkpoint reading (`checkpoints`).

This room sits below all others: it imports no other albert_tf room. `atomic` and
`report` are pure Python; `checkpoints` needs TensorFlow.
"""
