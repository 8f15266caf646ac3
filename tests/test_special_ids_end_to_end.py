"""Special token ids come from the SentencePiece model, end to end: a model whose ids all
differ from the release's ([MASK] 1, [SEP] 2, [CLS] 3, <pad> 6, first ordinary id 7)
goes through create_pretraining_data -> run_pretraining (dynamic masking from the data
summary) -> export -> run_classifier from the export."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from distributed_helpers import MECHANICS

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")


def _run(module_name, args):
    """The entry point's run() in this process, with its own flag values (the test's process
    has TensorFlow started already: a subprocess per command would start it twice more)."""
    import importlib
    import io

    from absl import flags

    module = importlib.import_module(module_name)
    values = flags.FlagValues()
    module.define_flags(values)
    values([module_name] + args)
    return module.run(values) if module_name.endswith("run_pretraining") else module.run(values, stream=io.StringIO())


def test_data_pretraining_and_fine_tuning_with_other_special_ids(sample_corpus, tmp_path):
    from test_data_special_ids import UNUSUAL_TOKENS, make_data_with_unusual_ids

    from albert_tf import AlbertConfig
    from albert_tf.data.pipeline import DynamicMasking, pretraining_dataset
    from albert_tf.data.summary import read_data_summary

    # the sample corpus's first 0.4 MB (whole documents): a 3000-piece model and ~900 instances
    # (more than the batches below), at a third of the tokenizing and model training
    corpus = tmp_path / "corpus.txt"
    with open(sample_corpus, encoding="utf-8") as f:
        documents = f.read().split("\n\n")
    kept, size = [], 0
    for document in documents:
        kept.append(document)
        size += len(document.encode("utf-8")) + 2
        if size >= 400_000:
            break
    corpus.write_text("\n\n".join(kept) + "\n\n", encoding="utf-8")
    data = make_data_with_unusual_ids(str(corpus), str(tmp_path / "data"), dupe_factor=1)
    summary = read_data_summary(data["files"])
    assert summary.special_tokens == UNUSUAL_TOKENS
    # the dynamic masking the trainer builds from the summary writes the model's [MASK]
    masking = DynamicMasking.from_summary(summary)
    batch = next(iter(pretraining_dataset(data["files"], 32, 128, 20, dynamic_masking=masking, seed=3)))
    ids, weights = batch["input_word_ids"].numpy(), batch["masked_lm_weights"].numpy()
    positions = batch["masked_lm_positions"].numpy()
    masked = np.take_along_axis(ids, positions, 1)[weights > 0]
    assert (masked == UNUSUAL_TOKENS.mask_id).mean() > 0.6  # 80% of picks become [MASK] (id 1)
    assert np.all(ids[:, 0] == UNUSUAL_TOKENS.cls_id)
    # never a control piece as a random replacement (a kept original may be <unk>, id 0 here: the
    # 10% left unchanged keep whatever the text had, as in the release)
    labels = batch["masked_lm_ids"].numpy()[weights > 0]
    replaced = (masked != UNUSUAL_TOKENS.mask_id) & (masked != labels)
    assert replaced.sum() > 10 and not np.isin(masked[replaced], [0, 2, 3, 6]).any()

    config = str(tmp_path / "albert_config.json")
    # two layers sharing one group: the ids' path does not depend on the depth
    config_values = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=summary.vocab_size,
                                                                    **MECHANICS)
    config_values.to_json_file(config)
    run, export = tmp_path / "run", tmp_path / "export"
    _run("albert_tf.run_pretraining", [f"--input_file={','.join(data['files'])}", f"--output_dir={run}",
          f"--albert_config_file={config}", "--max_seq_length=128", "--max_predictions_per_seq=20",
          "--train_batch_size=8", "--eval_batch_size=8", "--num_train_steps=4", "--num_warmup_steps=1",
          "--save_checkpoints_steps=4", "--iterations_per_loop=2", "--max_eval_steps=2", "--dynamic_masking",
          f"--export_dir={export}", f"--spm_model_file={data['spm_model']}", "--export_seq_length=32"])
    evaluation = json.load(open(run / "eval_results.json"))
    assert evaluation["global_step"] == 4 and evaluation["examples"] == 16

    # the exported preprocessing model packs with the model's own ids
    import tensorflow_text  # noqa: F401

    preprocess = tf.saved_model.load(str(export / "preprocess"))
    packed = preprocess(tf.constant(["Return the value of the named attribute."]))
    word_ids, mask = packed["input_word_ids"].numpy()[0], packed["input_mask"].numpy()[0]
    n = int(mask.sum())
    assert word_ids[0] == UNUSUAL_TOKENS.cls_id and word_ids[n - 1] == UNUSUAL_TOKENS.sep_id
    assert np.all(word_ids[n:] == UNUSUAL_TOKENS.pad_id) and n < len(word_ids)

    out = tmp_path / "classifier"
    _run("albert_tf.run_classifier", ["--task_name=tsv", "--labels=networking,numbers,text,concurrency",
          "--text_a_column=sentence", f"--data_dir={TOPICS}", f"--albert_hub_module_handle={export}",
          f"--output_dir={out}", "--do_train", "--do_eval", "--max_seq_length=32", "--train_batch_size=16",
          "--eval_batch_size=64", "--train_step=4", "--save_checkpoints_steps=4", "--iterations_per_loop=2"])
    result = json.load(open(out / "eval_results.json"))
    assert result["examples"] == 448 and result["initialized_from"] == str(export)
    assert result["best_step"] == 4
    rows = [line.split("\t") for line in open(out / "dev_predictions.tsv", encoding="utf-8").read().splitlines()[1:]]
    assert len(rows) == 448 and {r[2] for r in rows} <= {"networking", "numbers", "text", "concurrency"}
    assert result["accuracy"] == pytest.approx(np.mean([r[2] == r[3] for r in rows]))
