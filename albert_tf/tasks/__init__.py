"""Tasks: what each command brings to the one training driver
(`albert_tf.training.driver`): its examples and features, its model and head, its loss
and metrics: `pretraining` (masked LM + sentence order), and a folder per fine-tuning task
(`classification`, `squad`, `race`) holding its data reading, features, `Task` and serving
export.

Room: tasks import storage, modeling, data, training and export; entry points
(albert_tf/run_*.py) import tasks.
"""
