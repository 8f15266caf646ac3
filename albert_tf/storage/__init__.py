"""Writing and reading that every room shares: which output paths a command may write
(`outputs`: new, or albert_tf's own; never a user's), atomic output (`atomic`), the
checkpoint-matching report (`report`) and checkpoint reading (`checkpoints`).

This room sits below all others: it imports no other albert_tf room. `outputs`, `atomic`
and `report` are pure Python; `checkpoints` needs TensorFlow.
"""
