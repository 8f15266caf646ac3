"""Sentence(-pair) classification and regression (GLUE, TSV files): one module per role.

    data      get_task, read_examples: GLUE layouts and TSV files -> examples, checked
    pipeline  in-graph tokenization and packing, shared by training and the export
    metrics   the GLUE metrics (accuracy, F1, Matthews, Pearson/Spearman)
    task      ClassificationOptions, ClassificationTask: the task the training driver runs
    export    export_classifier: the raw-string classifier SavedModel
"""
