"""Data: text normalisation and SentencePiece, pretraining instances, tf.data input."""
