"""SQuAD v1.1 / v2.0 data: the official JSON -> examples -> windowed features -> cached
TFRecords -> (after the model) predictions and the official metrics. One module per role:

    reading      read_squad_examples: the JSON, checked, as SquadExamples
    alignment    tokenize_context: pieces with their exact character spans in the context
    features     convert_examples_to_features / features_to_arrays: the release's windows
    cache        load_or_build_features: feature TFRecords reused only when nothing changed
    postprocess  the model's outputs on every window -> n-best answers, prediction files
    metrics      the official v1.1 / v2.0 evaluation rules

Each module's docstring shows its use.
"""
