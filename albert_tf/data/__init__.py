"""Data: text normalisation and SentencePiece (tokenization, vocab, spm_training), the
sample corpus, input file globs (files), pretraining instances and TFRecords (instances,
example_codec, writer, summary), tf.data input (pipeline) and classification data."""
