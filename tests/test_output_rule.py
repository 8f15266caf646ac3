"""No command deletes or overwrites what it did not make (albert_tf.storage.outputs), through
every entry point: a user's file or directory at each output flag survives byte for byte,
the command ends with exit status 2 naming the flag and the path, and nothing at all is
written (no run directory, checkpoint, event file or marker): the refusal comes before any
work. Outputs that equal, hold or lie inside an input, or another output, are refused the
same way; albert_tf's own outputs (a second `make demo`) pass.

Every case runs in this process (the command module's main(argv), as `python -m` would),
before TensorFlow builds anything: the inputs are placeholders the
commands do not read before their outputs are checked.
"""

import importlib
import json
import os
import types

import pytest

from albert_tf.storage import outputs

COMMANDS = {
    "run_pretraining": "albert_tf.run_pretraining",
    "run_classifier": "albert_tf.run_classifier",
    "run_squad_v1": "albert_tf.run_squad_v1",
    "run_squad_v2": "albert_tf.run_squad_v2",
    "run_race": "albert_tf.run_race",
    "export_tfhub": "albert_tf.export_tfhub",
    "convert": "albert_tf.convert.__main__",
    "create_pretraining_data": "albert_tf.create_pretraining_data",
}
DIRECTORY = "directory"
FILE = "file"
# command -> {output flag: what a user may have there}
OUTPUT_FLAGS = {
    "run_pretraining": {"--output_dir": (DIRECTORY, FILE), "--export_dir": (DIRECTORY,)},
    "run_classifier": {"--output_dir": (DIRECTORY, FILE), "--export_dir": (DIRECTORY,)},
    "run_squad_v1": {"--output_dir": (DIRECTORY,), "--export_dir": (DIRECTORY,), "--train_feature_file": (FILE,),
                     "--predict_feature_file": (FILE,)},
    "run_squad_v2": {"--output_dir": (DIRECTORY,), "--export_dir": (DIRECTORY,), "--train_feature_file": (FILE,),
                     "--predict_feature_file": (FILE,)},
    "run_race": {"--output_dir": (DIRECTORY, FILE), "--export_dir": (DIRECTORY,), "--train_file": (FILE,),
                 "--eval_file": (FILE,), "--predict_file": (FILE,)},
    "export_tfhub": {"--export_path": (DIRECTORY, FILE)},
    "convert": {"--output": (DIRECTORY, FILE)},
    "create_pretraining_data": {"--output_file": (FILE,)},
}
CASES = [(command, flag, what) for command, flags in OUTPUT_FLAGS.items() for flag, whats in flags.items()
         for what in whats]


def _tree(root):
    """{relative path: bytes (files), None (directories), link target (links)} under root."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            key = os.path.relpath(path, root)
            if os.path.islink(path):
                found[key] = "-> " + os.readlink(path)
            elif os.path.isdir(path):
                found[key] = None
            else:
                with open(path, "rb") as f:
                    found[key] = f.read()
    return found


def _write(path, data=b"placeholder\n"):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.fixture
def inputs(tmp_path):
    """Placeholder inputs (only the config is read before the outputs are checked)."""
    from albert_tf import AlbertConfig

    root = tmp_path / "in"
    (root / "data").mkdir(parents=True)
    config = str(root / "albert_config.json")
    AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000).to_json_file(config)
    return types.SimpleNamespace(
        root=root, config=config, spm=_write(root / "spm.model"), records=_write(root / "train.tfrecord"),
        corpus=_write(root / "corpus.txt", b"One sentence.\nAnother one.\n"), squad=_write(root / "train.json", b"{}"),
        data=str(root / "data"), checkpoint=_write(root / "pretrained" / "pretrainer.weights.h5"))


def _arguments(command, p, out):
    """(fixed arguments, {output flag: default path}) of a valid invocation of `command`."""
    run = str(out / "run")
    model = [f"--albert_config_file={p.config}", f"--spm_model_file={p.spm}"]
    if command == "run_pretraining":
        return ([f"--input_file={p.records}", "--max_seq_length=128", *model],
                {"--output_dir": run, "--export_dir": run + "/export"})
    if command == "run_classifier":
        return (["--task_name=cola", f"--data_dir={p.data}", "--do_train", "--max_seq_length=64", *model],
                {"--output_dir": run, "--export_dir": run + "/export"})
    if command.startswith("run_squad"):
        return ([f"--train_file={p.squad}", f"--predict_file={p.squad}", "--do_train", "--do_predict",
                 "--max_seq_length=64", "--max_query_length=16", *model],
                {"--output_dir": run, "--export_dir": run + "/export"})
    if command == "run_race":
        return ([f"--data_dir={p.data}", "--do_train", "--do_eval", "--do_predict", "--max_seq_length=64",
                 "--max_qa_length=16", *model], {"--output_dir": run, "--export_dir": run + "/export"})
    if command == "export_tfhub":
        return ([f"--checkpoint={os.path.dirname(p.checkpoint)}", *model], {"--export_path": str(out / "export")})
    if command == "convert":
        return (["--from=albert_tf", f"--input={os.path.dirname(p.checkpoint)}"], {"--output": str(out / "converted")})
    return ([f"--input_file={p.corpus}", f"--spm_model_file={p.spm}"], {"--output_file": str(out / "train.tfrecord")})


def run_command(command, argv):
    """`python -m MODULE ARGV` in this process (the module's main(argv)): (exit status, stderr)."""
    from conftest import run_in_process

    result = run_in_process(importlib.import_module(COMMANDS[command]), argv)
    return result.returncode, result.stderr


def _refused(command, argv, message, tmp_path):
    before = _tree(tmp_path)
    status, err = run_command(command, argv)
    assert status == 2, (argv, err)
    assert f"{command}: error: " in err and message in err and "Traceback" not in err, (message, err)
    assert _tree(tmp_path) == before  # nothing written anywhere: no run directory, checkpoint, event file, marker
    return err


@pytest.mark.parametrize("command,flag,what", CASES, ids=[f"{c}{f}-{w}" for c, f, w in CASES])
def test_a_users_path_at_any_output_flag_is_refused_untouched_before_any_work(command, flag, what, inputs, tmp_path):
    users = tmp_path / "mine"
    if what == DIRECTORY:
        _write(users / "notes.txt", b"my notes\x00\xff")
        _write(users / "deeper" / "data.bin", os.urandom(64))
    else:
        users = tmp_path / "mine.bin"
        _write(users, b"my bytes\x00\xff")
    fixed, defaults = _arguments(command, inputs, tmp_path / "out")
    given = dict(defaults, **{flag: str(users)})
    err = _refused(command, fixed + [f"{k}={v}" for k, v in given.items()], f"{flag}={users}", tmp_path)
    assert "never overwrites what it did not make" in err or "exists and is not a directory" in err or \
        "is a directory" in err, err
    assert not (tmp_path / "out").exists()


def test_a_users_shard_or_summary_name_is_refused(inputs, tmp_path):
    """create_pretraining_data writes NAME-0000i-of-0000N shards and summary_NAME.json:
    a user's file under any of these names stops it before anything is written."""
    fixed, _ = _arguments("create_pretraining_data", inputs, tmp_path)
    out = tmp_path / "data" / "train.tfrecord"
    shard = _write(tmp_path / "data" / "train.tfrecord-00001-of-00002", b"mine")
    _refused("create_pretraining_data", fixed + [f"--output_file={out}", "--num_output_shards=2"],
             f"--output_file={shard} is a file that albert_tf did not make", tmp_path)
    assert open(shard, "rb").read() == b"mine" and not out.exists()
    os.remove(shard)
    summary = _write(tmp_path / "data" / "summary_train.tfrecord.json", b"{}")
    _refused("create_pretraining_data", fixed + [f"--output_file={out}"],
             f"--output_file={summary} is a file that albert_tf did not make", tmp_path)
    assert open(summary, "rb").read() == b"{}"
    assert sorted(os.listdir(tmp_path / "data")) == ["summary_train.tfrecord.json"]  # no shard was written


def _own_conversion(path, tf1=True):
    _write(os.path.join(path, "albert_config.json"), b"{}")
    _write(os.path.join(path, "model.ckpt.index" if tf1 else "pretrainer.weights.h5"))
    outputs.write_marker(path, outputs.CONVERSION)
    return path


def _own_run(path):
    _write(os.path.join(path, "run_info.json"), b"{}")
    _write(os.path.join(path, "ckpt-2.index"))
    outputs.write_marker(path, outputs.RUN)
    return path


def test_an_output_on_an_input_or_on_another_output_is_refused(inputs, tmp_path):
    """The cases that used to remove the input (an export over the run it exports, a
    conversion into the directory holding its input) and their kin."""
    p = inputs
    run = _own_run(str(tmp_path / "runs" / "base"))
    converted = _own_conversion(str(tmp_path / "converted"))
    export = str(tmp_path / "exports" / "base")
    with outputs.replacing_dir(export, outputs.EXPORT) as tmp:
        _write(os.path.join(tmp, "encoder", "assets", "spm.model"))
    model = [f"--albert_config_file={p.config}", f"--spm_model_file={p.spm}"]
    cases = [
        ("export_tfhub", [f"--checkpoint={run}", f"--export_path={run}", *model],
         f"--export_path={run} is the same path as the input --checkpoint={run}"),
        ("export_tfhub", [f"--checkpoint={run}", f"--albert_config_file={p.config}", f"--export_path={export}",
                          f"--spm_model_file={export}/encoder/assets/spm.model"],
         f"--export_path={export} contains the input --spm_model_file={export}/encoder/assets/spm.model"),
        ("convert", ["--from=tf1", f"--input={converted}/model.ckpt", f"--output={converted}"],
         f"--output={converted} contains the input --input={converted}/model.ckpt"),
        ("convert", ["--from=albert_tf", f"--input={converted}", f"--output={converted}"],
         f"--output={converted} is the same path as the input --input={converted}"),
        ("run_pretraining", [f"--input_file={p.records}", f"--albert_config_file={p.config}",
                             f"--init_checkpoint={run}", f"--output_dir={run}/finetune"],
         f"--output_dir={run}/finetune lies inside the input --init_checkpoint={run}"),
        ("run_pretraining", [f"--input_file={p.records}", f"--albert_config_file={p.config}",
                             f"--output_dir={tmp_path}/in"],
         f"--output_dir={tmp_path}/in contains the input --albert_config_file={p.config}"),
        ("run_classifier", ["--task_name=cola", f"--data_dir={p.data}", "--do_train", "--max_seq_length=64", *model,
                            f"--output_dir={tmp_path}/new", f"--export_dir={tmp_path}/new/best"],
         f"--export_dir={tmp_path}/new/best takes the name 'best', which the run in --output_dir writes itself"),
        ("run_squad_v1", [f"--train_file={p.squad}", f"--predict_file={p.squad}", "--do_train", "--do_predict",
                          "--max_seq_length=64", "--max_query_length=16", *model, f"--output_dir={tmp_path}/new",
                          f"--train_feature_file={tmp_path}/f.tf_record",
                          f"--predict_feature_file={tmp_path}/f.tf_record"],
         f"--train_feature_file={tmp_path}/f.tf_record and --predict_feature_file={tmp_path}/f.tf_record are the "
         "same path"),
        ("run_squad_v2", [f"--train_file={p.squad}", "--do_train", "--max_seq_length=64", "--max_query_length=16",
                          *model, f"--output_dir={tmp_path}/new", f"--train_feature_file={p.squad}"],
         f"--train_feature_file={p.squad} is the same path as the input --train_file={p.squad}"),
        ("run_race", [f"--data_dir={p.data}", "--do_train", "--max_seq_length=64", "--max_qa_length=16", *model,
                      f"--output_dir={tmp_path}/new", f"--export_dir={tmp_path}/new"],
         f"--output_dir={tmp_path}/new and --export_dir={tmp_path}/new are the same path"),
        ("run_race", [f"--data_dir={p.data}", "--do_train", "--max_seq_length=64", "--max_qa_length=16", *model,
                      f"--output_dir={p.data}/run"],
         f"--output_dir={p.data}/run lies inside the input --data_dir={p.data}"),
        ("create_pretraining_data", [f"--input_file={p.corpus}", f"--spm_model_file={p.spm}",
                                     f"--output_file={p.corpus}"],
         f"--output_file={p.corpus} is the same path as the input --input_file={p.corpus}"),
    ]
    before = _tree(tmp_path)
    errors = [_refused(command, argv, message, tmp_path) for command, argv, message in cases]
    assert all(message in err for (_, _, message), err in zip(cases, errors))
    assert _tree(tmp_path) == before  # the run, the conversion and the export all survive unchanged
    assert os.path.exists(os.path.join(run, "ckpt-2.index")) and os.path.exists(os.path.join(converted,
                                                                                             "model.ckpt.index"))


def test_albert_tfs_own_outputs_pass_as_a_second_make_demo_needs(inputs, tmp_path):
    """What tools/demo.py writes, made a first time by the writers that mark it, then
    checked again by every command the demo runs: resumed or replaced, not refused."""
    from absl import flags

    from albert_tf import create_pretraining_data, run_classifier, run_pretraining
    from albert_tf.tasks.classification import task as classification

    out = tmp_path / "demo_output"
    records = str(out / "pretrain" / "train.tfrecord")
    shards = [f"{records}-{i:05d}-of-00004" for i in range(4)]
    for path in [*shards, str(out / "pretrain" / "summary_train.tfrecord.json")]:
        with outputs.replacing_file(path, outputs.PRETRAINING_DATA):
            _write(path, json.dumps({"output_files": {}}).encode())
    run_dir, export_dir = str(out / "run"), str(out / "export")
    classifier_dir = str(out / "classifier")
    for directory in (run_dir, classifier_dir):
        outputs.claim_run(directory)
    with outputs.replacing_dir(export_dir, outputs.EXPORT) as tmp:
        for name in ("encoder", "preprocess"):
            _write(os.path.join(tmp, name, "saved_model.pb"))
        _write(os.path.join(tmp, "encoder", "assets", "albert_config.json"), open(inputs.config, "rb").read())
    with outputs.replacing_dir(os.path.join(classifier_dir, "export"), outputs.EXPORT) as tmp:
        _write(os.path.join(tmp, "saved_model.pb"))

    def parsed(module, argv):
        values = flags.FlagValues()
        module.define_flags(values)
        values(["x", *argv])
        return values

    before = _tree(tmp_path)
    create_pretraining_data.check_paths(parsed(create_pretraining_data, [
        f"--input_file={inputs.corpus}", f"--output_file={records}", f"--spm_model_file={inputs.spm}",
        "--num_output_shards=4"]))
    run_pretraining.check_paths(parsed(run_pretraining, [
        f"--input_file={records}-*", f"--output_dir={run_dir}", f"--albert_config_file={inputs.config}",
        f"--export_dir={export_dir}", f"--spm_model_file={inputs.spm}"]))
    values = parsed(run_classifier, [
        "--task_name=tsv", "--labels=a,b", f"--data_dir={inputs.data}", f"--albert_hub_module_handle={export_dir}",
        f"--output_dir={classifier_dir}", "--do_train", "--max_seq_length=64",
        f"--export_dir={os.path.join(classifier_dir, 'export')}"])
    classification.check_options(*run_classifier.options_from_flags(values))
    assert _tree(tmp_path) == before


def _export_litert(argv):
    """export_litert in this process: (exit status, stderr)."""
    from conftest import run_in_process

    from albert_tf import export_litert

    result = run_in_process(export_litert, argv)
    return result.returncode, result.stderr


def _marked(path, kind, data):
    with outputs.replacing_file(str(path), kind):
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
    return str(path)


def test_export_litert_never_replaces_another_commands_config_or_sentencepiece_model(inputs, tmp_path):
    """export_litert --output=DIR/x.tflite writes DIR/x.json and DIR/x.spm.model beside it: a
    config of write_preset_configs (configs/albert_base.json, marked as albert_tf's config) or
    a SentencePiece model of train_sentencepiece at those names is another command's output,
    refused (exit 2) and left untouched."""
    configs = tmp_path / "configs"
    configs.mkdir()
    config = json.dumps({"hidden_size": 768, "num_hidden_layers": 12, "vocab_size": 30000}) + "\n"
    _marked(configs / "albert_base.json", outputs.CONFIG, config)
    _marked(configs / "sp.spm.model", outputs.SENTENCEPIECE_MODEL, "a trained model\n")
    model = [f"--init_checkpoint={os.path.dirname(inputs.checkpoint)}", f"--spm_model_file={inputs.spm}"]
    for name, what, taken in (("albert_base", "is albert_tf's config file, not a LiteRT model's JSON",
                               "albert_base.json"),
                              ("sp", "is albert_tf's SentencePiece model file, not a LiteRT model's SentencePiece "
                                     "model", "sp.spm.model")):
        before = _tree(tmp_path)
        status, err = _export_litert([*model, f"--output={configs / (name + '.tflite')}"])
        assert status == 2 and "export_litert: error: --output (its " in err and what in err, err
        assert str(configs / taken) in err and "Traceback" not in err
        assert _tree(tmp_path) == before  # the config untouched, nothing else written
    assert (configs / "albert_base.json").read_text() == config


def test_export_litert_passes_over_its_own_earlier_outputs(inputs, tmp_path):
    """Its own three files pass, marked with its kinds; beside its marked .tflite a SentencePiece
    model of train_sentencepiece or a config (even one holding its JSON's keys) is not its own."""
    from absl import flags

    from albert_tf import export_litert

    sidecar = json.dumps({"kind": "encoder", "outputs": [], "signature": "serving_default",
                          "raw_string_input": False})
    for name, spm_kind, info_kind, refused in (
            ("now", outputs.LITERT_SENTENCEPIECE, outputs.LITERT_INFO, None),
            ("spm", outputs.SENTENCEPIECE_MODEL, outputs.LITERT_INFO,
             "is albert_tf's SentencePiece model file, not a LiteRT model's SentencePiece model"),
            ("config", outputs.LITERT_SENTENCEPIECE, outputs.CONFIG,
             "is albert_tf's config file, not a LiteRT model's JSON")):
        _marked(tmp_path / f"{name}.tflite", outputs.LITERT_MODEL, "tflite")
        _marked(tmp_path / f"{name}.spm.model", spm_kind, "spm")
        _marked(tmp_path / f"{name}.json", info_kind, sidecar)
        values = flags.FlagValues()
        export_litert.define_flags(values)
        values(["export_litert", f"--init_checkpoint={os.path.dirname(inputs.checkpoint)}",
                f"--output={tmp_path / (name + '.tflite')}"])
        if refused is None:
            export_litert.check_paths(values)  # no OutputRefused
        else:
            with pytest.raises(outputs.OutputRefused, match=refused):
                export_litert.check_paths(values)


# Kinds several commands still write (a known gap of "what one command writes another never
# replaces": each of these is one family of outputs, e.g. every run_* command's run directory).
SHARED_KINDS = {"RUN", "EXPORT", "FEATURE_CACHE", "GENERATED_DATA"}
# library modules that write for one command (the command's own module checks the paths)
LIBRARY_OF = {"albert_tf/convert/api.py": "albert_tf/convert/__main__.py",
              "albert_tf/data/writer.py": "albert_tf/create_pretraining_data.py",
              "albert_tf/data/beam_pipeline.py": "albert_tf/create_pretraining_data.py"}


def test_every_other_kind_is_written_by_one_command():
    """export_litert wrote its JSON as CONFIG, the kind of tools/write_preset_configs.py, and so
    replaced configs/albert_base.json; each kind outside SHARED_KINDS is one command's."""
    import re

    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    writers = {}
    for folder in ("albert_tf", "tools"):
        for directory, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                path = os.path.join(directory, name)
                if not name.endswith(".py") or path.endswith(os.path.join("storage", "outputs.py")):
                    continue
                with open(path, encoding="utf-8") as f:
                    for kind in set(re.findall(r"outputs\.([A-Z][A-Z_]+)\b", f.read())):
                        if getattr(outputs, kind, None) in outputs.DESCRIPTIONS:
                            module = os.path.relpath(path, root)
                            writers.setdefault(kind, set()).add(LIBRARY_OF.get(module, module))
    assert writers["CONFIG"] == {"tools/write_preset_configs.py"}
    assert writers["LITERT_INFO"] == writers["LITERT_SENTENCEPIECE"] == {"albert_tf/export_litert.py"}
    shared = {kind: sorted(paths) for kind, paths in writers.items() if len(paths) > 1}
    assert set(shared) <= SHARED_KINDS, shared
