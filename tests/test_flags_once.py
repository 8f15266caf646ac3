"""Each flag of a training command is declared once: the field of an options dataclass
(albert_tf.storage.options.option: default and help) that albert_tf.cli.define_options
makes it from; the commands still hand the release's defaults on to the task and the driver."""

import dataclasses
import os
import subprocess
import sys
import typing

import pytest
from absl import flags

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
COMMANDS = ("run_classifier", "run_race", "run_squad_v1", "run_squad_v2", "run_pretraining")


def _define(name, monkeypatch):
    """The command's flags and what define_options made: [(dataclass, {flag: field})]."""
    import importlib

    from albert_tf import cli

    made, original = [], cli.define_options

    def recording(flag_values, cls, *args, **kwargs):
        result = original(flag_values, cls, *args, **kwargs)
        made.append((cls, result))
        return result

    monkeypatch.setattr(cli, "define_options", recording)
    values = flags.FlagValues()
    importlib.import_module(f"albert_tf.{name}").define_flags(values)
    return values, made


@pytest.mark.parametrize("name", COMMANDS)
def test_every_flag_of_an_options_field_is_made_from_it_and_no_other_declares_one(name, monkeypatch):
    from albert_tf.storage.options import HELP, field_default
    from albert_tf.training.options import TrainingOptions

    values, made = _define(name, monkeypatch)
    classes = [cls for cls, _ in made]
    assert classes[0] is not TrainingOptions and classes[1:] == [TrainingOptions], classes
    from_fields = {}
    for cls, flag_to_field in made:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for flag, field_name in flag_to_field.items():
            field = fields[field_name]
            assert values[flag].default == field_default(field), (name, flag)
            kind = field.type if field.type in (bool, int, float, str, list) else typing.get_args(field.type)[0]
            expected = {bool: "bool", int: "int", float: "float", str: "string",
                        list: "comma separated list of strings"}[kind]
            if "choices" in field.metadata:
                expected = "string enum"
            assert values[flag].flag_type() == expected, (name, flag, values[flag].flag_type())
            assert values[flag].help, (name, flag)
            from_fields[flag] = (cls, field_name)
    # every field with help of the task's options is its flag (run_squad_v1: not the v2 head's)
    task_cls, task_flags = made[0]
    skipped = {"start_n_top", "end_n_top", "dropout_prob"} if name == "run_squad_v1" else set()
    with_help = {f.name for f in dataclasses.fields(task_cls) if HELP in f.metadata}
    assert with_help - set(task_flags.values()) == skipped, name
    # a flag declared by a DEFINE of its own is no field of these options (else two defaults)
    others = {flag for flag in values if values[flag].name == flag and flag not in from_fields}
    fields_with_help = {f.name for cls in classes for f in dataclasses.fields(cls) if HELP in f.metadata}
    assert not others & fields_with_help, (name, sorted(others & fields_with_help))


# the release's defaults, as each command gave them before the flags were made from the fields
RELEASE_TRAINING = {
    "run_classifier": dict(train_batch_size=32, eval_batch_size=8, learning_rate=5e-5, num_train_steps=1000,
                           num_warmup_steps=0, save_checkpoints_steps=1000, keep_checkpoint_max=5,
                           iterations_per_loop=100, optimizer="adamw", dtype_policy="auto",
                           gradient_accumulation_steps=1, remat=False),
    "run_race": dict(train_batch_size=32, eval_batch_size=8, learning_rate=1e-5, num_train_steps=12000,
                     num_warmup_steps=1000, save_checkpoints_steps=1000, keep_checkpoint_max=5,
                     iterations_per_loop=1000, optimizer="adamw", dtype_policy="auto", gradient_accumulation_steps=1,
                     remat=False),
    "run_squad_v1": dict(train_batch_size=48, eval_batch_size=8, learning_rate=5e-5, save_checkpoints_steps=1000,
                         keep_checkpoint_max=5, iterations_per_loop=1000, optimizer="adamw", dtype_policy="auto",
                         gradient_accumulation_steps=1, remat=False),
    "run_pretraining": dict(train_batch_size=4096, eval_batch_size=64, learning_rate=0.00176, num_train_steps=125000,
                            num_warmup_steps=3125, start_warmup_step=0, poly_power=1.0, optimizer="lamb",
                            save_checkpoints_steps=5000, keep_checkpoint_max=5, iterations_per_loop=1000,
                            do_train=True, do_eval=True, max_eval_steps=100, jit_compile=False, dtype_policy="auto",
                            gradient_accumulation_steps=1, remat=False),
}
RELEASE_TASK = {
    "run_classifier": dict(max_seq_length=512, predict_batch_size=8, classifier_dropout=0.1, do_lower_case=True,
                           random_seed=12345, strategy="default", text_a_column="text_a", label_column="label"),
    "run_race": dict(task_name="race", max_seq_length=512, max_qa_length=128, dropout_prob=0.1, train_batch_size=32,
                     eval_batch_size=8, predict_batch_size=8, random_seed=12345, strategy="default", tpu_name=None),
    "run_squad_v1": dict(version="v1", max_seq_length=384, doc_stride=128, max_query_length=64, train_batch_size=48,
                         predict_batch_size=8, num_train_epochs=3.0, warmup_proportion=0.1, n_best_size=20,
                         max_answer_length=30, start_n_top=5, end_n_top=5, dropout_prob=0.1, strategy="default"),
    "run_pretraining": dict(max_seq_length=512, max_predictions_per_seq=20, global_batch_size=4096,
                            deterministic=False, random_seed=12345, shuffle_buffer_size=10000, init_checkpoint=None,
                            use_one_hot_embeddings=False, sentence_loss=True, dynamic_masking=None),
}


@pytest.mark.parametrize("name", sorted(RELEASE_TRAINING))
def test_the_commands_hand_the_release_defaults_to_the_task_and_the_driver(name):
    """With only --output_dir, options_from_flags builds the task's options and
    TrainingOptions with the release's defaults (not TrainingOptions' own, e.g. run_race's
    learning rate 1e-5 and 1000 steps per loop); a given flag reaches both."""
    import importlib

    module = importlib.import_module(f"albert_tf.{name}")

    def options(*args):
        values = flags.FlagValues()
        module.define_flags(values)
        values([name, "--output_dir=x", *args])
        if name == "run_pretraining":
            return module.options_from_flags(values, config="a config")
        if name == "run_squad_v1":
            return module.options_from_flags(values, "v1")
        return module.options_from_flags(values)

    task, training = options()
    assert {k: getattr(training, k) for k in RELEASE_TRAINING[name]} == RELEASE_TRAINING[name]
    assert {k: getattr(task, k) for k in RELEASE_TASK[name]} == RELEASE_TASK[name]
    assert training.output_dir == "x" and (task.config == "a config" if name == "run_pretraining" else True)
    task, training = options("--learning_rate=0.25", "--train_batch_size=16", "--dtype_policy=float32")
    assert (training.learning_rate, training.train_batch_size, training.dtype_policy) == (0.25, 16, "float32")
    assert getattr(task, "global_batch_size" if name == "run_pretraining" else "train_batch_size", 16) == 16


def test_define_options_makes_each_type_and_refuses_a_field_without_help():
    from albert_tf import cli
    from albert_tf.storage.options import option, required

    @dataclasses.dataclass
    class Options:
        path: str = required("Where.")
        steps: typing.Optional[int] = option(None, "How many.")
        rate: float = option(0.5, "How fast.")
        fast: bool = option(True, "Whether.")
        names: list = option(None, "Which.")
        kind: str = option("a", "What.", choices=("a", "b"))
        internal: int = 3

    values = flags.FlagValues()
    made = cli.define_options(values, Options, flag_names={"steps": "num_steps"})
    assert made == {"path": "path", "num_steps": "steps", "rate": "rate", "fast": "fast", "names": "names",
                    "kind": "kind"}
    values(["x", "--num_steps=7", "--rate=2", "--nofast", "--names=p,q", "--kind=b"])
    assert (values.path, values.num_steps, values.rate, values.fast, values.names, values.kind) == (
        None, 7, 2.0, False, ["p", "q"], "b")
    assert values["kind"].help == "<a|b>: What." and "internal" not in values
    with pytest.raises(TypeError, match="internal has no help"):
        cli.define_options(flags.FlagValues(), Options, names=("internal",))


@pytest.mark.real_process  # a fresh interpreter: a test worker has TensorFlow imported
def test_defining_every_commands_flags_imports_no_tensorflow():
    """The options live in modules without TensorFlow: --help and a bad flag answer at once."""
    code = ("import sys, importlib\nfrom absl import flags\n"
            f"for name in {COMMANDS!r}:\n"
            "    importlib.import_module('albert_tf.' + name).define_flags(flags.FlagValues())\n"
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr[-2000:]
