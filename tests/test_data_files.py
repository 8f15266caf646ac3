"""The one input-glob helper (albert_tf.data.files.expand_input_files) and its callers."""

import importlib

import pytest

from albert_tf.data.files import InputError, expand_input_files

from conftest import run_in_process


@pytest.fixture
def tree(tmp_path):
    for name, text in (("b-2.txt", "x\n"), ("b-1.txt", "y\n"), ("a.txt", "z\n"), ("empty.txt", ""),
                       ("odd[1].txt", "w\n")):
        (tmp_path / name).write_text(text)
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_patterns_in_order_and_each_patterns_matches_sorted(tree):
    t = str(tree)
    assert expand_input_files(f"{t}/b-*.txt, {t}/a.txt") == [f"{t}/b-1.txt", f"{t}/b-2.txt", f"{t}/a.txt"]
    assert expand_input_files([f"{t}/a.txt", f"{t}/b-2.txt"]) == [f"{t}/a.txt", f"{t}/b-2.txt"]
    # a literal name with glob characters is that file
    assert expand_input_files(f"{t}/odd[1].txt") == [f"{t}/odd[1].txt"]
    # an empty file beside others is fine (only all-empty input is an error)
    assert expand_input_files(f"{t}/empty.txt,{t}/a.txt") == [f"{t}/empty.txt", f"{t}/a.txt"]


def test_errors_name_the_flag_and_the_pattern(tree):
    t = str(tree)
    cases = [
        ("", "--input_file is empty: name one or more files or globs."),
        (" , ", "--input_file is empty: name one or more files or globs."),
        (f"{t}/a.txt,{t}/none-*.txt", f"--input_file: '{t}/none-*.txt' matches no file."),
        (f"{t}/sub", f"--input_file: '{t}/sub' is a directory; name the files in it (e.g. {t}/sub/*)."),
        (f"{t}/b-*.txt,{t}/b-1.txt", f"--input_file: '{t}/b-1.txt' is matched by both '{t}/b-*.txt' and "
                                     f"'{t}/b-1.txt'; name each file once."),
        (f"{t}/empty.txt", f"--input_file: {t}/empty.txt is empty."),
    ]
    for patterns, message in cases:
        with pytest.raises(InputError) as e:
            expand_input_files(patterns)
        assert str(e.value) == message
    with pytest.raises(InputError) as e:
        expand_input_files(f"{t}/nothing*", flag="--eval_input_file")
    assert str(e.value) == f"--eval_input_file: '{t}/nothing*' matches no file."
    assert issubclass(InputError, ValueError)  # cli.main turns it into exit status 2


def test_every_caller_uses_it(tree, tmp_path):
    """The pipeline, the writer's tool and train_sentencepiece give the same messages."""
    from albert_tf.data import pipeline

    t = str(tree)
    with pytest.raises(InputError) as e:
        pipeline.pretraining_dataset(f"{t}/none*.tfrecord", 8, 128, 20)
    assert str(e.value) == f"--input_file: '{t}/none*.tfrecord' matches no file."
    tools = {"create_pretraining_data": [f"--output_file={tmp_path}/o.tfrecord", f"--spm_model_file={t}/a.txt"],
             "train_sentencepiece": [f"--model_prefix={tmp_path}/m"]}
    for name, args in tools.items():
        result = run_in_process(importlib.import_module(f"tools.{name}"), [f"--input_file={t}/sub", *args])
        assert result.returncode == 2, result.stderr[-1500:]
        assert result.stderr.strip().splitlines()[-1] == (
            f"{name}: error: --input_file: '{t}/sub' is a directory; name the files in it (e.g. {t}/sub/*).")
