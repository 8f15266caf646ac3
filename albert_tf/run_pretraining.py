"""ALBERT pretraining (masked LM + sentence order) under any tf.distribute strategy.

    python -m albert_tf.run_pretraining --flagfile=configs/base.flags \
        --input_file=data/train.tfrecord-* --output_dir=runs/base

Flags keep the original release's names and defaults. A run resumes by itself from the
newest `ckpt-N` in --output_dir (model, optimizer slots, step and input position), with
the settings of its previous training (a change is refused with exit status 2 unless
--allow_changed_settings; a longer --num_train_steps is allowed; albert_tf.training.sessions,
which also records every session in output_dir/run_info.json);
--init_checkpoint starts a new run from another run's weights and fails loudly when they
do not match the model. Progress goes to the console, `output_dir/metrics.jsonl` and
TensorBoard (`output_dir/train`, `output_dir/eval`); evaluation results to
`output_dir/eval_results.json` and `eval_results.txt`. With --export_dir the trained
model is exported at the end as albert_tf.export_tfhub does.
"""

import sys

from absl import flags

from albert_tf import cli
from albert_tf.tasks.common import check_positive
from albert_tf.training.accumulation import check_accumulation
from albert_tf.training.precision import check_policy
from albert_tf.storage import files


# the training flags taken from TrainingOptions' fields; those whose defaults are the release's
# run_pretraining's own are PretrainingOptions' fields
TRAINING_FLAGS = ("output_dir", "do_train", "do_eval", "poly_power", "start_warmup_step", "keep_checkpoint_max",
                  "jit_compile", "gradient_accumulation_steps", "remat")
RELEASE_NAMES = {"global_batch_size": "train_batch_size"}


def define_flags(flag_values=None):
    """The release's run_pretraining flags, plus --strategy, --jit_compile, --dtype_policy etc.,
    in `flag_values` (default: the global FLAGS): the fields of tasks.options.PretrainingOptions
    and training.options.TrainingOptions (each default written once, there) and the flags
    that are the command's alone (inputs, strategy, export)."""
    from albert_tf.tasks.options import PretrainingOptions
    from albert_tf.training.options import TrainingOptions

    fv = flags.FLAGS if flag_values is None else flag_values
    cli.define_options(fv, PretrainingOptions, flag_names=RELEASE_NAMES)
    cli.define_options(fv, TrainingOptions, names=TRAINING_FLAGS)
    fv = {"flag_values": fv}
    flags.DEFINE_string("input_file", None, "Input TF example files (comma-separated globs).", **fv)
    flags.DEFINE_string("eval_input_file", None, "Evaluation TF example files (default: --input_file).", **fv)
    flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the pre-trained ALBERT model.", **fv)
    flags.DEFINE_string("strategy", "default", "tpu | multi_worker_mirrored | mirrored | one_device | default.", **fv)
    flags.DEFINE_string("tpu", None, "TPU name or grpc:// address (with --strategy=tpu).", **fv)
    cli.define_allow_changed_settings_flag(fv["flag_values"])
    flags.DEFINE_bool("dynamic_masking", False, "Re-draw the masked-LM masks every epoch in tf.data.", **fv)
    flags.DEFINE_string("export_dir", None, "Export TF-Hub-style SavedModels here at the end (needs "
                        "--spm_model_file): a new path or an earlier export of albert_tf's (replaced); anything else "
                        "is refused.", **fv)
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model of the data (for --export_dir).", **fv)
    flags.DEFINE_integer("export_seq_length", 128, "Default sequence length of the exported preprocessing model.", **fv)


# the flags that change a training's result: a run directory continues only with the same
# (albert_tf.training.sessions; --num_train_steps may change)
SETTINGS = ("learning_rate", "poly_power", "num_warmup_steps", "start_warmup_step", "train_batch_size",
            "gradient_accumulation_steps", "max_seq_length", "max_predictions_per_seq", "optimizer", "random_seed",
            "init_checkpoint", "dtype_policy", "sentence_loss", "dynamic_masking")


def check_flags(f):
    """Raises ValueError for bad flag combinations, naming the flags."""
    if not f.output_dir:
        raise ValueError("--output_dir is required.")
    if not f.albert_config_file:
        raise ValueError("--albert_config_file is required.")
    if not (f.do_train or f.do_eval):
        raise ValueError("at least one of --do_train and --do_eval must be true.")
    if f.do_train and not f.input_file:
        raise ValueError("--do_train needs --input_file.")
    if f.do_eval and not (f.eval_input_file or f.input_file):
        raise ValueError("--do_eval needs --eval_input_file or --input_file.")
    check_positive(f, ("train_batch_size", "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
                       "keep_checkpoint_max", "iterations_per_loop", "max_eval_steps", "max_seq_length",
                       "max_predictions_per_seq"))
    check_accumulation(f.gradient_accumulation_steps, f.train_batch_size)
    if f.num_warmup_steps < 0 or f.start_warmup_step < 0:
        raise ValueError("--num_warmup_steps and --start_warmup_step must not be negative.")
    if f.max_predictions_per_seq > f.max_seq_length:
        raise ValueError(f"--max_predictions_per_seq ({f.max_predictions_per_seq}) exceeds --max_seq_length "
                         f"({f.max_seq_length}).")
    check_policy(f.dtype_policy)
    if f.strategy == "tpu" and not f.tpu:
        raise ValueError("--strategy=tpu needs --tpu.")
    if f.tpu and f.strategy != "tpu":
        raise ValueError(f"--tpu is only used with --strategy=tpu (got --strategy={f.strategy}).")
    if f.export_dir and not f.spm_model_file:
        raise ValueError("--export_dir needs --spm_model_file (the preprocessing model embeds it).")
    if f.learning_rate <= 0:
        raise ValueError(f"--learning_rate must be positive, got {f.learning_rate}.")


def options_from_flags(f, config, session=None):
    """-> (PretrainingOptions, TrainingOptions); checks the inputs (every input shard, the
    SentencePiece model for --export_dir) before anything is written."""
    from albert_tf.data.files import expand_input_files
    from albert_tf.data.pipeline import DynamicMasking
    from albert_tf.data.summary import read_data_summary
    from albert_tf.data.vocab import SpecialTokens
    from albert_tf.tasks.pretraining import PretrainingOptions, validate_files
    from albert_tf.training.driver import TrainingOptions

    input_files = expand_input_files(f.input_file) if f.input_file else []
    eval_files = expand_input_files(f.eval_input_file, flag="--eval_input_file") if f.eval_input_file else input_files
    validate_files(sorted(set(input_files) | set(eval_files)), f.max_seq_length, f.max_predictions_per_seq)
    if f.export_dir:  # the exported preprocessing model embeds it: check it before training
        SpecialTokens.from_sentencepiece(f.spm_model_file)
    masking = None
    if f.dynamic_masking and f.do_train:
        # special ids and masking settings come from the data's summary (written by
        # create_pretraining_data from its SentencePiece model), never typed again
        summary = read_data_summary(input_files)
        if summary.vocab_size > config.vocab_size:
            raise ValueError(f"the data's SentencePiece model has {summary.vocab_size} pieces, more than vocab_size "
                             f"{config.vocab_size} of {f.albert_config_file}.")
        masking = DynamicMasking.from_summary(summary)
    task = cli.task_options(PretrainingOptions, f, config=config, input_files=input_files, eval_files=eval_files,
                            global_batch_size=f.train_batch_size, dynamic_masking=masking)
    training = TrainingOptions(
        output_dir=f.output_dir, train_batch_size=f.train_batch_size, eval_batch_size=f.eval_batch_size,
        num_train_steps=f.num_train_steps, num_warmup_steps=f.num_warmup_steps,
        start_warmup_step=f.start_warmup_step, poly_power=f.poly_power, learning_rate=f.learning_rate,
        optimizer=f.optimizer, save_checkpoints_steps=f.save_checkpoints_steps,
        keep_checkpoint_max=f.keep_checkpoint_max, iterations_per_loop=f.iterations_per_loop,
        do_train=f.do_train, do_eval=f.do_eval, evaluate_every_checkpoint=False, max_eval_steps=f.max_eval_steps,
        jit_compile=f.jit_compile, dtype_policy=f.dtype_policy,
        gradient_accumulation_steps=f.gradient_accumulation_steps, remat=f.remat, session=session)
    return task, training


def check_paths(f):
    """--output_dir (a new run directory or albert_tf's own run, resumed) and --export_dir
    (a new path or albert_tf's own export, replaced): neither a user's path, nor an input
    or inside one or holding one, nor the same path (albert_tf.storage.outputs; the export
    may lie inside the run, e.g. output_dir/export). Raises OutputRefused naming the flag;
    writes nothing."""
    from albert_tf.data.files import expand_input_files
    from albert_tf.storage import outputs

    inputs = [outputs.Input("--albert_config_file", f.albert_config_file),
              outputs.Input("--init_checkpoint", f.init_checkpoint),
              outputs.Input("--spm_model_file", f.spm_model_file)]
    for flag, value in (("--input_file", f.input_file), ("--eval_input_file", f.eval_input_file)):
        if value:
            inputs += [outputs.Input(flag, p) for p in expand_input_files(value, flag=flag)]
    outputs.check([outputs.Output("--output_dir", f.output_dir, outputs.RUN),
                   outputs.Output("--export_dir", f.export_dir, outputs.EXPORT)], inputs)


def run(f, stream=None):
    """Runs training and/or evaluation as the flags say; returns a dict of results.
    Progress goes to `stream` (default: sys.stdout as it is at the call)."""
    check_flags(f)  # before importing TensorFlow: bad flags and outputs fail at once
    check_paths(f)
    from albert_tf.storage import atomic
    from albert_tf.storage.report import CheckpointMismatchError

    # a run refused for its starting weights (--init_checkpoint) leaves no output_dir it
    # made, and nothing new in one that existed (its albert_config.json, its marker)
    with atomic.removed_if_refused(f.output_dir, CheckpointMismatchError):
        return _run(f, stream or sys.stdout)


def _run(f, stream):
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.tasks.pretraining import check_run_config

    config = AlbertConfig.from_json_file(f.albert_config_file)
    if f.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length ({f.max_seq_length}) exceeds max_position_embeddings "
                         f"({config.max_position_embeddings}) of {f.albert_config_file}.")
    has_config = check_run_config(f.output_dir, config, f.albert_config_file)
    from albert_tf.training.sessions import check_settings

    session = cli.session(f, "run_pretraining", SETTINGS, "num_train_steps", f.do_train, tpu=f.strategy == "tpu")
    check_settings(f.output_dir, session)

    import keras
    import tensorflow as tf

    from albert_tf.tasks.pretraining import PretrainingTask
    from albert_tf.training.distribution import get_strategy, is_chief
    from albert_tf.training.driver import train_and_evaluate

    keras.utils.set_random_seed(f.random_seed)
    if f.deterministic:
        tf.config.experimental.enable_op_determinism()
    # the strategy first: multi-worker collectives must be configured before any op runs
    strategy = get_strategy(f.strategy, f.tpu)
    task_options, training = options_from_flags(f, config, session)
    chief = is_chief(strategy)
    if chief:
        from albert_tf.storage import outputs

        outputs.claim_run(f.output_dir)  # checked in check_paths; created (or kept) and marked
        if not has_config:
            config.to_json_file(files.join(f.output_dir, "albert_config.json"))
    outcome = train_and_evaluate(PretrainingTask(task_options), training, strategy, is_chief=chief, stream=stream)
    results = {"final_step": outcome["final_step"], "initialized_from": outcome["initialized_from"]}
    if outcome.get("summary"):
        results["eval"] = outcome["summary"]
    if f.export_dir and chief:
        from albert_tf.export.exporter import export_tfhub

        model = outcome["trainer"].model
        results["export_dir"] = export_tfhub(model, f.spm_model_file, f.export_dir,
                                             seq_length=min(f.export_seq_length, config.max_position_embeddings))
        print(f"exported to {results['export_dir']}/encoder and {results['export_dir']}/preprocess", file=stream,
              flush=True)
    return results


def main(argv=None):
    """`run_pretraining ARGV` in this process: returns its exit status
    (albert_tf.cli.main: its own flags, the process's state put back; not undone:
    cli.IRREVERSIBLE).

    Args:
        argv: the arguments, without the program name (default sys.argv[1:]).
    """
    return cli.main("run_pretraining", define_flags, run, argv)


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
