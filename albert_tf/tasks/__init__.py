"""Tasks: what each command brings to the one training driver (`albert_tf.training.driver`):
`pretraining`, and a folder per fine-tuning task (`classification`, `squad`, `race`).
Room: tasks import storage, modeling, data, training and export; entry points import tasks.
"""
