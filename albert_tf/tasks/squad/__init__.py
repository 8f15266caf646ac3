"""SQuAD v1.1 / v2.0: JSON -> examples -> windowed features -> cached TFRecords -> predictions
and the official metrics; one module per role, each docstring showing its use."""
