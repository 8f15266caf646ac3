"""bf16 learns what float32 learns, per task, end to end at tiny size (issue 29).

Each task's entry point runs twice from the same random start (the same --random_seed, the
same data, steps and learning rate), at --dtype_policy=float32 and at mixed_bfloat16, and
the dev metric of the bf16 run must be near float32's. The data are learnable training sets
evaluated on themselves (tiny models, one seed): these tests catch a policy that stops
learning, not a small bias; benchmarks/precision_learning_bench.py compares realistic runs
over seeds. Classification: tests/test_precision.py (from a pretrained start).
"""

import json
import os
import shutil

import pytest

from conftest import write_tiny_config
from tools import make_race_data, make_squad_data

POLICIES = ("float32", "mixed_bfloat16")
# the budgets and starts: benchmarks/results/learning_checks (3 seeds, both policies). Leaving the
# plateau is chaotic at this size: at 40 epochs one v2 start of three stayed on it at bf16 (F1 41.7)
# while float32's left (87.5), at 60 epochs one float32 start stayed (16.7), and v1's float32 ended at
# 68.1 on one start of three: each takes the better of two starts per policy, which a policy that
# cannot leave the plateau (issue 29) still fails
EPOCHS = {"v1": 30, "v2": 40}
STARTS = {"v1": 2, "v2": 2}
# training (and evaluated) questions: v2 at 24 (60% of 40's steps) still reached F1 96.9 float32, 95.8 bf16;
# v1 at 24 questions and 20 epochs stayed at 69.8 float32, so it keeps 40
QUESTIONS = {"v1": 40, "v2": 24}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("config"), num_hidden_groups=1)


def _run(module, args):
    from absl import flags

    values = flags.FlagValues()
    module.define_flags(values)
    values([module.__name__] + args)
    return module.run(values, stream=open(os.devnull, "w"))


def _both_policies(run_one):
    """{policy: metric} of run_one(policy) for float32 then mixed_bfloat16."""
    return {policy: run_one(policy) for policy in POLICIES}


@pytest.mark.learning(both_policies=True)
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_squad_from_random_weights_learns_the_same_at_bf16(version, spm_model, config_file, tmp_path, learning):
    """The people task (tools/make_squad_data.py --kind=people: a question-ignoring model sits
    at F1 about 12): F1 on the training questions after the same budget."""
    from albert_tf import run_squad_v1, run_squad_v2

    module = run_squad_v1 if version == "v1" else run_squad_v2
    path = tmp_path / "train.json"
    data = make_squad_data.make_people_dataset("1.1" if version == "v1" else "2.0", QUESTIONS[version],
                                                            seed=5, max_context_chars=300)
    path.write_text(json.dumps(data), encoding="utf-8")

    def run_start(policy, start):
        out = tmp_path / policy if start == 0 else tmp_path / f"{policy}-start{start}"
        results = _run(module, [
            f"--dtype_policy={policy}", f"--spm_model_file={spm_model}", f"--albert_config_file={config_file}",
            f"--output_dir={out}", f"--train_file={path}", f"--predict_file={path}", "--max_seq_length=96",
            "--doc_stride=48", "--max_query_length=24", "--do_train", "--do_predict", "--train_batch_size=16",
            "--learning_rate=3e-3", f"--num_train_epochs={EPOCHS[version]}", "--warmup_proportion=0.1",
            f"--random_seed={learning.seed_or(7) + 1000 * start}",
            "--save_checkpoints_steps=100000", "--iterations_per_loop=50", "--n_best_size=5"])
        summary = json.load(open(out / "eval_results.json"))
        assert summary["dtype_policy"] == policy
        return results["metrics"]["f1"]

    def run_one(policy):
        return max(run_start(policy, start) for start in range(STARTS[version]))

    f1 = _both_policies(run_one)
    print(version, "F1", f1)
    # two runs that computed differently (F1 alone may agree: v2 reached 100 at both when measured)
    nbest = {p: json.load(open(tmp_path / p / "nbest_predictions.json")) for p in POLICIES}
    assert nbest["float32"].keys() == nbest["mixed_bfloat16"].keys()
    assert nbest["float32"] != nbest["mixed_bfloat16"]
    learning.record("f1", f1["float32"], 70.0, "higher", policy="float32")
    assert f1["float32"] >= 70.0, f1  # float32 left the plateau: the comparison means something
    # one seed of a tiny model: float32 against bf16 moved 9 points either way when measured; the
    # failure this guards against (issue 29) left bf16 on the plateau, 40 points below
    learning.record("abs_f1_difference", abs(f1["mixed_bfloat16"] - f1["float32"]), 12.0, "lower", policy="both")
    assert abs(f1["mixed_bfloat16"] - f1["float32"]) <= 12.0, f1


@pytest.mark.learning(both_policies=True)
def test_race_from_random_weights_learns_the_same_at_bf16(spm_model, config_file, tmp_path, learning):
    from albert_tf import run_race

    tool = make_race_data
    made = tmp_path / "made"
    tool.make_race(made, num_articles=6, seed=7, layout="files")
    learn = tmp_path / "learn" / "RACE"
    shutil.copytree(made / "RACE" / "train", learn / "train")
    shutil.copytree(made / "RACE" / "train", learn / "dev")

    def run_one(policy):
        out = tmp_path / policy
        _run(run_race, [f"--dtype_policy={policy}", f"--data_dir={learn.parent}", f"--spm_model_file={spm_model}",
                        f"--albert_config_file={config_file}", f"--output_dir={out}", "--max_seq_length=64",
                        "--max_qa_length=32", "--eval_batch_size=16", "--do_train", "--do_eval",
                        "--train_batch_size=16", "--learning_rate=1e-3", "--train_step=80", "--warmup_step=8",
                        "--save_checkpoints_steps=80", "--iterations_per_loop=100", "--dropout_prob=0.0",
                        f"--random_seed={learning.seed_or(7)}"])
        summary = json.load(open(out / "eval_results.json"))
        assert summary["dtype_policy"] == policy
        return 100.0 * summary["accuracy"]

    accuracy = _both_policies(run_one)
    print("race accuracy", accuracy)
    # two runs that computed differently: the dev probabilities differ
    probabilities = {}
    for policy in POLICIES:
        with open(tmp_path / policy / "dev_predictions.jsonl", encoding="utf-8") as f:
            probabilities[policy] = [json.loads(line)["probabilities"] for line in f]
    assert len(probabilities["float32"]) == len(probabilities["mixed_bfloat16"]) == 54
    assert probabilities["float32"] != probabilities["mixed_bfloat16"]
    # measured at 80 steps: float32 96.3, bf16 90.7 (at 150 steps 94.4 and 96.3)
    learning.record("accuracy", accuracy["float32"], 80.0, "higher", policy="float32")
    assert accuracy["float32"] >= 80.0, accuracy
    learning.record("abs_accuracy_difference", abs(accuracy["mixed_bfloat16"] - accuracy["float32"]), 12.0, "lower",
                    policy="both")
    assert abs(accuracy["mixed_bfloat16"] - accuracy["float32"]) <= 12.0, accuracy


@pytest.mark.learning(both_policies=True)
@pytest.mark.parametrize("sentence_loss", [True, False])
def test_pretraining_loss_at_bf16_within_one_percent_of_float32(sentence_loss, pretraining_records, tmp_path,
                                                                learning):
    """The same LAMB run (same initial weights, deterministic input order) at both policies:
    held-out loss within 1%, and the training loss at steps 20 and 40, with every variable
    (weights, optimizer slots) float32; with the sentence head and without it
    (--nosentence_loss, the reproduction's "None" objective)."""
    import keras

    from albert_tf import AlbertConfig
    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import TrainingOptions, train_and_evaluate

    records, _ = pretraining_records
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_groups=1)

    def run_one(policy):
        # the same initial weights for both policies (run_pretraining seeds so)
        keras.utils.set_random_seed(learning.seed_or(1))
        task = PretrainingTask(PretrainingOptions(config, [records[0]], eval_files=[records[1]], max_seq_length=128,
                                                  global_batch_size=8, deterministic=True,
                                                  random_seed=learning.seed_or(1),
                                                  shuffle_buffer_size=100, sentence_loss=sentence_loss))
        # batch 8 (16 cost 40% more CPU), 40 steps at 2e-2 (80 at 1e-2 cost 30% more CPU): masked-LM
        # loss 6.44 at both policies (6.49 at 80 steps and 1e-2; 7.01 at 40 and 1e-2), curves 6e-5 apart
        options = TrainingOptions(output_dir=str(tmp_path / policy), train_batch_size=8, eval_batch_size=32,
                                  num_train_steps=40, learning_rate=2e-2, optimizer="lamb", num_warmup_steps=4,
                                  save_checkpoints_steps=40, iterations_per_loop=20, max_eval_steps=4,
                                  write_curves=False, dtype_policy=policy)
        results = train_and_evaluate(task, options, stream=open(os.devnull, "w"))
        trainer = results["trainer"]
        # bf16 computes, every variable (weights and optimizer slots) stays float32
        expected = "bfloat16" if policy == "mixed_bfloat16" else "float32"
        assert trainer.model.encoder.embeddings.compute_dtype == expected
        assert all(v.dtype == "float32" for v in trainer.model.weights)
        assert all(v.dtype == "float32" for v in trainer.optimizer.variables if v is not trainer.optimizer.iterations)
        with open(tmp_path / policy / "metrics.jsonl", encoding="utf-8") as f:
            curve = [json.loads(line) for line in f]
        return results["eval"], [r["loss"] for r in curve if r["split"] == "train"]

    runs = _both_policies(run_one)
    evals = {policy: run[0] for policy, run in runs.items()}
    curves = {policy: run[1] for policy, run in runs.items()}
    print("pretraining eval", evals, "training loss at steps 20 and 40", curves)
    # the training loss tracks float32's along the way too (steps 20 and 40), not only at the end
    learning.record("training_loss_drop_steps_20_to_40", curves["mixed_bfloat16"][0] - curves["mixed_bfloat16"][-1],
                    0.3, "higher", strict=True, policy="mixed_bfloat16")
    learning.record("max_relative_training_loss_difference",
                    max(abs(a - b) / b for a, b in zip(curves["mixed_bfloat16"], curves["float32"])), 0.01, "lower",
                    policy="both")
    assert len(curves["float32"]) == 2 and curves["mixed_bfloat16"][-1] < curves["mixed_bfloat16"][0] - 0.3
    for a, b in zip(curves["mixed_bfloat16"], curves["float32"], strict=True):
        assert abs(a - b) <= 0.01 * b, curves
    f32, bf16 = evals["float32"], evals["mixed_bfloat16"]
    # it learned: about ln(3000) = 8.0 at the start (measured: 6.44 with the sentence head and without)
    learning.record("masked_lm_loss", f32["masked_lm_loss"], 7.0, "lower", strict=True, policy="float32")
    assert f32["masked_lm_loss"] < 7.0, f32
    assert bf16["loss"] != f32["loss"], evals  # two runs that computed differently
    learning.record("relative_loss_difference", abs(bf16["loss"] - f32["loss"]) / f32["loss"], 0.01, "lower",
                    policy="both")
    assert abs(bf16["loss"] - f32["loss"]) <= 0.01 * f32["loss"], evals
