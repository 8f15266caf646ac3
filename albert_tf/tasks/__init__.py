"""Tasks: what each command brings to the one training driver
(`albert_tf.training.driver`): its examples and features, its model and head, its loss
and metrics. One file per task: `pretraining` (masked LM + sentence order) and
`classification` (GLUE and TSV classification/regression).

Room: tasks import storage, modeling, data, training and export; entry points
(albert_tf/run_*.py) import tasks.
"""
