"""RACE and generic multiple-choice data: files -> examples -> [N, C, T] features -> cached TFRecords.
One module per role:

    examples  MultipleChoiceExample(s), MultipleChoiceSummary, MultipleChoiceDataError
    reading   read_race (both RACE layouts), read_multiple_choice_jsonl
    features  MultipleChoiceSettings, examples_to_arrays: the release's race_utils layout
    cache     load_or_build_features: feature TFRecords reused only when nothing changed
"""
