"""Converts ALBERT weights between the original TF1 release, Hugging Face, keras-hub and albert_tf
(reading all four; writing albert_tf, tf1, hf and keras_hub).

Pretrained models, bare encoders, SQuAD and multiple-choice models convert alike: a
release checkpoint from run_squad_v1.py / run_squad_v2.py, or a Hugging Face
AlbertForQuestionAnswering directory, becomes an albert_tf AlbertForQuestionAnswering
directory; a release checkpoint from run_race.py, or a Hugging Face
AlbertForMultipleChoice directory, an albert_tf AlbertForMultipleChoice directory (and
both back to tf1).

    python -m albert_tf.convert --from=tf1 --to=albert_tf --input=albert_base/model.ckpt-best \
        --albert_config_file=albert_base/albert_config.json --output=converted/albert_base
    python -m albert_tf.convert --from=hf --to=albert_tf --input=hf/albert-base-v2 --output=converted/base
    python -m albert_tf.convert --from=keras_hub --to=albert_tf --input=keras_hub_preset_dir --output=...
    python -m albert_tf.convert --from=albert_tf --to=tf1 --input=runs/base --output=release_format/
    python -m albert_tf.convert --from=albert_tf --to=hf --input=runs/base --spm_model_file=spm.model \
        --output=hf/albert_tf_base          # transformers' from_pretrained / AutoTokenizer load it
    python -m albert_tf.convert --from=albert_tf --to=keras_hub --input=runs/base --spm_model_file=spm.model \
        --output=keras_hub/albert_tf_base   # keras_hub.models.AlbertMaskedLM.from_preset loads it

--output is a new path or an earlier conversion of albert_tf's (replaced atomically); an
existing directory albert_tf did not make, the input itself or a directory holding it is
refused (exit 2) before anything is read.

--to=hf and --to=keras_hub write the tokenizer with the release's tokenization inside
(albert_tf.convert.release_spm), read it back and check it against albert_tf's on built-in
texts (cased, accented, digit-commas): where they differ the tool refuses (exit 2) unless
--allow_tokenizer_mismatch, which the output's tokenizer_check.json then records. The tool
prints what the target's tokenizer still does otherwise.

What made the conversion (this command, its flags as given, albert_tf's version and source
state, TensorFlow/Keras, the device) is OUTPUT/.albert_tf_output.json's "made_by"
(albert_tf.storage.provenance), for every target.

Nothing is written unless every target variable is assigned exactly once with its shape;
otherwise the full list of missing, unexpected and misshaped variables is printed (exit 2).
The tool then prints pooled_output of a fixed id sequence for comparison with the source
(and, for a SQuAD model, its head's start_logits (v1) or cls_logits (v2); for a
multiple-choice model, the logit of that sequence as a single option).
"""

import dataclasses

from albert_tf import entry_points, option_flags
from albert_tf.storage.options import Command, LowerCase, ModelFiles, Output, option

FORMATS = ("tf1", "hf", "keras_hub", "albert_tf")  # read
TARGETS = ("albert_tf", "tf1", "hf", "keras_hub")  # written


@dataclasses.dataclass(kw_only=True)
class ConvertOptions:
    """convert's own flags (--from, a Python keyword, and --to: the fields `from_format` and
    `to_format`; the rest are the fields it shares: RECORD)."""

    from_format: str = option(None, "Source format.", choices=FORMATS, names={"convert": "from"})
    to_format: str = option("albert_tf", "Target format.", choices=TARGETS, names={"convert": "to"})
    input: str = option(None, "Source checkpoint, model directory or weights file.")
    allow_tokenizer_mismatch: bool = option(False, "--to=hf and --to=keras_hub: write the conversion even where the "
                                                   "written tokenizer gives other ids than albert_tf on the built-in "
                                                   "check texts (refused otherwise, exit 2); recorded in the "
                                                   "output's tokenizer_check.json.")


RECORD = Command("convert", ((ConvertOptions, ("from_format", "to_format", "input")), (Output, None),
                             (ModelFiles, None), (LowerCase, None), (ConvertOptions, ("allow_tokenizer_mismatch",))))
from albert_tf.storage import files


def define_flags(flag_values=None):
    option_flags.define_command(flag_values, RECORD)


def check_options(f):
    """Every check of the command, before anything is read: the flags (ValueError) and the
    paths (check_paths). Returns {field: value} of RECORD."""
    found = option_flags.values(f, RECORD)
    if not found["from_format"] or not found["input"] or not found["output"]:
        raise ValueError("--from, --input and --output are required.")
    check_paths(f)
    return found


def check_paths(f):
    """--output: new or albert_tf's own conversion, and apart from the inputs
    (albert_tf.storage.outputs); raises OutputRefused naming the flag. Writes nothing."""
    from albert_tf.storage import outputs

    outputs.check([outputs.Output("--output", f["output"].value, outputs.CONVERSION)],
                  [outputs.Input("--input", f["input"].value),
                   outputs.Input("--albert_config_file", f["albert_config_file"].value),
                   outputs.Input("--spm_model_file", f["spm_model_file"].value)])


def run(f):
    found = check_options(f)  # before TensorFlow starts
    source, target, input_path, output = found["from_format"], found["to_format"], found["input"], found["output"]
    albert_config_file = found["albert_config_file"]
    from albert_tf.convert.api import load_source, spm_model_in, write_target
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.storage import provenance

    made_by = provenance.record("convert", option_flags.given_flags(f))
    config = AlbertConfig.from_json_file(albert_config_file) if albert_config_file else None
    model = load_source(source, input_path, config)
    spm_model_file = found["spm_model_file"] or spm_model_in(source, input_path)
    written, kind, left_behind = write_target(model, target, output, spm_model_file, found["do_lower_case"],
                                              found["allow_tokenizer_mismatch"], made_by)
    print(f"converted {input_path} ({source}) -> {written} ({target}) as {type(model).__name__}, "
          f"{model.count_params():,} parameters"
          + (f", from {model.run_checkpoint}" if getattr(model, "run_checkpoint", None) else ""))
    if getattr(model, "not_in_source", None):
        print(f"not in the source (initial values written): {', '.join(model.not_in_source)}")
    print_fixed_outputs(model)
    if target in ("hf", "keras_hub"):
        print(f"written as {kind}" + (f"; left behind (no place in {target}): {', '.join(left_behind)}"
                                      if left_behind else "; every weight kept"))
        print_tokenizer_check(written)
    # the written model read back, with the same fixed ids: compare the lines by eye
    print(f"read back from {written} ({target}):")
    print_fixed_outputs(load_source(target, written))
    return 0


def print_tokenizer_check(directory):
    """The lines of the written tokenizer's check (release_spm.CHECK_FILE in `directory`)."""
    from albert_tf.convert.release_spm import CHECK_FILE
    from albert_tf.storage.json_files import read_json

    report = read_json(files.join(directory, CHECK_FILE), f"the tokenizer's check ({CHECK_FILE})")
    print(f"tokenizer: {report['tokenizer']} gives albert_tf's ids for {report['equal']} of {report['texts']} "
          f"built-in texts (cased, accented, digit-commas); the release's normalisation in its character map "
          f"({report['normalisation_rules']:,} rules), {report['digit_comma_pieces_left_out']} digit-comma pieces "
          "left out of the segmentation")
    if report["differ"]:
        print(f"tokenizer MISMATCH allowed (--allow_tokenizer_mismatch) on {len(report['differ'])} texts, "
              f"e.g. {report['differ'][0]['text']!r}; see {files.join(directory, CHECK_FILE)}")
    for note in report["not_expressed"]:
        print(f"tokenizer: still differs from albert_tf: {note}")


def print_fixed_outputs(model):
    """The fixed-ids lines: pooled_output[:5], and the head's first outputs where it has one."""
    from albert_tf.convert.api import fixed_head_output, fixed_ids, fixed_output

    values = ", ".join(f"{v:+.6f}" for v in fixed_output(model)[:5])
    print(f"pooled_output[:5] for ids {list(fixed_ids(model.config))}: [{values}]")
    head = fixed_head_output(model)
    if head is not None:
        name, array = head
        print(f"{name}[:5] for the same ids: [{', '.join(f'{v:+.6f}' for v in array[:5])}]")


main, entry = entry_points.command("convert", define_flags, run)


if __name__ == "__main__":
    entry()
