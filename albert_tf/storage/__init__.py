"""Writing and reading that every room shares: the one file layer every path goes through
(`files`: local paths by the standard library, URLs by tf.io.gfile), which output paths a command may write
(`outputs`: new, or albert_tf's own; never a user's), atomic output (`atomic`), the one
JSON reader (`json_files`), the checkpoint-matching report (`report`), checkpoint reading
(`checkpoints`) and what made an output (`provenance`: the "made_by" record every command
that writes results keeps).

This room sits below all others: it imports no other albert_tf room. `files`, `outputs`,
`atomic`, `json_files` (TensorFlow only for a URL) and `report` are pure Python; `checkpoints` needs
TensorFlow; `provenance` imports TensorFlow and Keras only inside the functions that record
their versions and devices.
"""
