"""RACE and generic multiple-choice data: files -> examples -> [N, C, T] features -> cached TFRecords.
One module per role:

    examples  MultipleChoiceExample(s), MultipleChoiceSummary, MultipleChoiceDataError
    reading   read_race (both RACE layouts), read_multiple_choice_jsonl
    features  MultipleChoiceSettings, examples_to_arrays: the release's race_utils layout
    cache     load_or_build_features: feature TFRecords reused only when nothing changed

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
