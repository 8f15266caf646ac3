"""RACE and generic multiple-choice data: files -> examples -> [N, C, T] features -> cached TFRecords.
One module per role:

    examples  MultipleChoiceExample(s), MultipleChoiceSummary, MultipleChoiceDataError
    reading   read_race (both RACE layouts), read_multiple_choice_jsonl
    features  MultipleChoiceSettings, examples_to_arrays: the release's race_utils layout
    cache     load_or_build_features: feature TFRecords reused only when nothing changed

    from albert_tf.tasks.race.cache import load_or_build_features
    from albert_tf.tasks.race.features import MultipleChoiceSettings, examples_to_arrays
    from albert_tf.tasks.race.reading import read_race

    examples = read_race("data", "train")                 # data/RACE/train/{middle,high}/...
    examples.summary.layout                                # "files" or "all.txt"
    settings = MultipleChoiceSettings(max_seq_length=512, max_qa_length=128)
    arrays = examples_to_arrays(examples, tokenizer, settings)   # input_ids [N, C, T], label_ids [N]
    result = load_or_build_features(examples, "out/train.tfrecord", tokenizer, settings)
    result.arrays, result.rebuilt, result.reason

Example (runnable; `tokenizer` a SentencePieceTokenizer; MultipleChoiceExample(s) from
albert_tf.tasks.race.examples):
```python
examples = MultipleChoiceExamples([MultipleChoiceExample(
    example_id="a1", question_index=0, context="The cat sat on the mat.",
    question="The cat sat on the _.", options=("mat", "moon"), label=0)])
arrays = examples_to_arrays(examples, tokenizer, MultipleChoiceSettings(max_seq_length=32, max_qa_length=16))
arrays["input_ids"].shape   # (1, 2, 32)
arrays["label_ids"]         # array([0], dtype=int32)
```
"""
