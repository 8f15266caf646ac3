"""Each flag of a training command is declared once: the field of an options dataclass
(albert_tf.storage.options.option: default, help, properties) that the command's options
record (storage.options.Command) makes it from (albert_tf.option_flags); the commands hand
the release's defaults on to the task and the driver."""

import dataclasses
import os
import subprocess
import sys
import typing

import pytest
from absl import flags

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
COMMANDS = ("run_classifier", "run_race", "run_squad_v1", "run_squad_v2", "run_pretraining")
# every other command that takes flags: its module (with `RECORD`, its options record)
OTHER_COMMANDS = ("albert_tf.create_pretraining_data", "albert_tf.export_tfhub", "albert_tf.export_litert",
                  "albert_tf.convert.__main__", "albert_tf.param_table", "tools.demo", "tools.make_race_data",
                  "tools.make_sample_corpus", "tools.make_squad_data", "tools.make_topic_task", "tools.plot_metrics",
                  "tools.reproduce", "tools.train_sentencepiece", "tools.update_build",
                  "tools.write_preset_configs")
# the package's commands among them: their flags are defined without TensorFlow
PACKAGE_COMMANDS = tuple(name for name in OTHER_COMMANDS if name.startswith("albert_tf."))


def _record(name):
    if "." in name:  # a module of OTHER_COMMANDS
        import importlib

        return importlib.import_module(name).RECORD
    from albert_tf.tasks.classification.options import COMMAND as CLASSIFIER
    from albert_tf.tasks.options import RUN_PRETRAINING
    from albert_tf.tasks.race.options import COMMAND as RACE
    from albert_tf.tasks.squad.options import COMMANDS

    return {"run_classifier": CLASSIFIER, "run_race": RACE, "run_squad_v1": COMMANDS["v1"],
            "run_squad_v2": COMMANDS["v2"], "run_pretraining": RUN_PRETRAINING}[name]


@pytest.mark.parametrize("name", COMMANDS + OTHER_COMMANDS)
def test_every_flag_of_a_command_is_made_from_a_field_of_its_record(name):
    """Each flag's default is the record's (the field's, or the command's override), its type
    the field's, its help the field's; no flag is declared beside the record."""
    import importlib

    from albert_tf.option_flags import PROCESS_FLAGS

    record = _record(name)
    values = flags.FlagValues()
    importlib.import_module(name if "." in name else f"albert_tf.{name}").define_flags(values)
    made = {}
    for cls, field in record.fields():
        flag = record.flag_name(field)
        kind = field.type if field.type in (bool, int, float, str, list) else typing.get_args(field.type)[0]
        default = record.default(field)
        if kind is list and isinstance(default, str):  # a list flag's default written as its text
            default = default.split(",")
        assert values[flag].default == default, (name, flag)
        expected = {bool: "bool", int: "int", float: "float", str: "string",
                    list: "comma separated list of strings"}[kind]
        if "choices" in field.metadata:
            expected = "string enum"
        assert values[flag].flag_type() == expected, (name, flag, values[flag].flag_type())
        assert record.help(field) in values[flag].help, (name, flag)
        made[flag] = field.name
    declared = {flag for flag in values if values[flag].name == flag and flag not in PROCESS_FLAGS}
    assert declared == set(made), (name, sorted(declared ^ set(made)))
    # a default is overridden only where it differs from the field's
    for field_name, default in record.defaults.items():
        field = next(f for _, f in record.fields() if f.name == field_name)
        assert default != field.metadata.get("flag_default", field.default), (name, field_name)


def _options_classes():
    """Every options dataclass of the package and its tools (the modules whose source
    declares a flag field with option() or required())."""
    import importlib
    import re

    found = []
    for folder in ("albert_tf", "tools"):
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                path = os.path.join(directory, name)
                if not name.endswith(".py") or not re.search(r"= (option|required)\(", open(path).read()):
                    continue
                module = importlib.import_module(os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."))
                found += _dataclasses_of(module)
    return found


def _dataclasses_of(module):
    return [value for value in vars(module).values()
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__]


def test_each_flag_field_is_declared_once_across_every_options_class():
    """A flag's field (default, help, properties) is written in one class; the others inherit
    it, and a command's record overrides only its default."""
    from albert_tf.storage.options import HELP

    declared = {}
    for cls in _options_classes():
        own = cls.__dict__.get("__annotations__", {})
        for field in dataclasses.fields(cls):
            if field.name in own and HELP in field.metadata:
                declared.setdefault(field.name, []).append(cls.__qualname__)
    twice = {name: where for name, where in declared.items() if len(where) > 1}
    assert not twice, twice
    for name in ("dtype_policy", "iterations_per_loop", "do_train", "learning_rate", "strategy", "output_dir"):
        assert len(declared[name]) == 1, name


def test_the_settings_positive_and_release_names_are_field_properties():
    """What the entry points' tuples held (SETTINGS, POSITIVE, RELEASE_NAMES) comes from the
    fields: each command's settings as 0.2.0 recorded them in run_info.json."""
    from albert_tf.storage.options import LENGTH, POSITIVE, SETTING

    settings = {
        "run_classifier": {"learning_rate", "warmup_step", "train_batch_size", "gradient_accumulation_steps",
                           "max_seq_length", "optimizer", "random_seed", "init_checkpoint", "albert_hub_module_handle",
                           "dtype_policy", "classifier_dropout", "task_name"},
        "run_race": {"learning_rate", "warmup_step", "train_batch_size", "gradient_accumulation_steps",
                     "max_seq_length", "max_qa_length", "random_seed", "init_checkpoint", "albert_hub_module_handle",
                     "dtype_policy", "dropout_prob", "task_name", "high_only", "middle_only"},
        "run_squad_v1": {"learning_rate", "warmup_proportion", "train_batch_size", "gradient_accumulation_steps",
                         "max_seq_length", "doc_stride", "max_query_length", "random_seed", "init_checkpoint",
                         "albert_hub_module_handle", "dtype_policy"},
        "run_pretraining": {"learning_rate", "poly_power", "num_warmup_steps", "start_warmup_step",
                            "train_batch_size", "gradient_accumulation_steps", "max_seq_length",
                            "max_predictions_per_seq", "optimizer", "random_seed", "init_checkpoint", "dtype_policy",
                            "sentence_loss", "dynamic_masking"}}
    settings["run_squad_v2"] = settings["run_squad_v1"] | {"dropout_prob"}
    lengths = {"run_classifier": ("train_step",), "run_race": ("train_step",), "run_squad_v1": ("num_train_epochs",),
               "run_squad_v2": ("num_train_epochs",), "run_pretraining": ("num_train_steps",)}
    for name in COMMANDS:
        record = _record(name)
        assert set(record.flags_with(SETTING)) == settings[name], name
        assert record.flags_with(LENGTH) == lengths[name], name
        assert {"train_batch_size", "save_checkpoints_steps", "iterations_per_loop"} <= set(
            record.flags_with(POSITIVE)), name
    assert "num_keep_checkpoint" in _record("run_race").flags_with(POSITIVE)


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
    "run_race": dict(task_name="race", max_seq_length=512, max_qa_length=128, dropout_prob=0.1,
                     predict_batch_size=8, random_seed=12345, strategy="default", tpu_name=None),
    "run_squad_v1": dict(version="v1", max_seq_length=384, doc_stride=128, max_query_length=64,
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
        return module.options_from_flags(values)

    task, training = options()
    assert {k: getattr(training, k) for k in RELEASE_TRAINING[name]} == RELEASE_TRAINING[name]
    assert {k: getattr(task, k) for k in RELEASE_TASK[name]} == RELEASE_TASK[name]
    assert training.output_dir == "x" and (task.config == "a config" if name == "run_pretraining" else True)
    task, training = options("--learning_rate=0.25", "--train_batch_size=16", "--dtype_policy=float32")
    assert (training.learning_rate, training.train_batch_size, training.dtype_policy) == (0.25, 16, "float32")
    assert getattr(task, "global_batch_size", 16) == 16


def test_define_options_makes_each_type_and_refuses_a_field_without_help():
    from albert_tf import option_flags
    from albert_tf.storage.options import Command, option, required

    @dataclasses.dataclass
    class Options:
        path: str = required("Where.")
        steps: typing.Optional[int] = option(None, "How many.", names={"some": "num_steps"})
        rate: float = option(0.5, "How fast.")
        fast: bool = option(True, "Whether.")
        names: list = option(None, "Which.")
        kind: str = option("a", "What.", choices=("a", "b"))
        internal: int = 3

    values = flags.FlagValues()
    made = option_flags.define_command(values, Command("some", ((Options, None),), defaults={"rate": 2.5}))
    assert made == {"path": "path", "num_steps": "steps", "rate": "rate", "fast": "fast", "names": "names",
                    "kind": "kind"}
    assert values["rate"].default == 2.5
    values(["x", "--num_steps=7", "--rate=2", "--nofast", "--names=p,q", "--kind=b"])
    assert (values.path, values.num_steps, values.rate, values.fast, values.names, values.kind) == (
        None, 7, 2.0, False, ["p", "q"], "b")
    assert values["kind"].help == "<a|b>: What." and "internal" not in values
    with pytest.raises(TypeError, match="internal has no help"):
        option_flags.define_options(flags.FlagValues(), Options, names=("internal",))
    with pytest.raises(TypeError, match="defaults for fields it has no flag of: nothing"):
        Command("some", ((Options, None),), defaults={"nothing": 1}).fields()


@pytest.mark.real_process  # a fresh interpreter: a test worker has TensorFlow imported
def test_defining_every_commands_flags_imports_no_tensorflow():
    """The options live in modules without TensorFlow: --help and a bad flag answer at once."""
    code = ("import sys, importlib\nfrom absl import flags\n"
            f"for name in {COMMANDS!r}:\n"
            "    importlib.import_module('albert_tf.' + name).define_flags(flags.FlagValues())\n"
            f"for name in {PACKAGE_COMMANDS!r}:\n"
            "    importlib.import_module(name).define_flags(flags.FlagValues())\n"
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr[-2000:]
