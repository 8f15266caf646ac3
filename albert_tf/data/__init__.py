"""Data: text, SentencePiece, pretraining instances and TFRecords, tf.data input; one module a role."""
