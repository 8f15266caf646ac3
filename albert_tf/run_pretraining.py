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

from albert_tf import entry_points, option_flags
from albert_tf.tasks.options import RUN_PRETRAINING
from albert_tf.storage import files


def define_flags(flag_values):
    """The command's flags, made from its options record (tasks.options.RUN_PRETRAINING)."""
    option_flags.define_command(flag_values, RUN_PRETRAINING)


def check_flags(f):
    """The flag values' checks (the record's positive ones, then the combinations); raises
    ValueError naming the flags."""
    from albert_tf.training.accumulation import check_accumulation
    from albert_tf.training.precision import check_policy

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
    option_flags.values(f, RUN_PRETRAINING)  # raises for a value its field says must be positive
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


def options_from_flags(f, config, session=None):
    """-> (PretrainingOptions, TrainingOptions) from the options record; checks the inputs
    (every input shard, the SentencePiece model for --export_dir) before anything is written."""
    from albert_tf.data.files import expand_input_files
    from albert_tf.data.pipeline import DynamicMasking
    from albert_tf.data.summary import read_data_summary
    from albert_tf.data.vocab import SpecialTokens
    from albert_tf.tasks.pretraining import PretrainingOptions, validate_files

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
    return option_flags.records(f, RUN_PRETRAINING, PretrainingOptions, config=config, input_files=input_files,
                                eval_files=eval_files, global_batch_size=f.train_batch_size, dynamic_masking=masking,
                                training_given={"evaluate_every_checkpoint": False, **(
                                    {"session": session} if session is not None else {})})


def check_paths(f):
    """--output_dir (a run, resumed) and --export_dir (an export, replaced) under
    albert_tf.storage.outputs' rule, the chief holding them (a run that only evaluates does
    not hold the run). Raises OutputRefused naming the flag; writes nothing but the locks."""
    from albert_tf.data.files import expand_input_files
    from albert_tf.storage import lock, outputs

    inputs = [outputs.Input("--albert_config_file", f.albert_config_file),
              outputs.Input("--init_checkpoint", f.init_checkpoint),
              outputs.Input("--spm_model_file", f.spm_model_file)]
    for flag, value in (("--input_file", f.input_file), ("--eval_input_file", f.eval_input_file)):
        if value:
            inputs += [outputs.Input(flag, p) for p in expand_input_files(value, flag=flag)]
    chief = lock.leads(f.strategy)
    outputs.check([outputs.Output("--output_dir", f.output_dir, outputs.RUN, held=chief and f.do_train),
                   outputs.Output("--export_dir", f.export_dir, outputs.EXPORT, held=chief)], inputs)


def check(f):
    """Every check of a run, in this order, before any work: the flag values (`check_flags`,
    before TensorFlow is imported), the paths (`check_paths`), the config (its position
    embeddings hold --max_seq_length; a resumed run keeps its own), the session against the
    run's previous training (albert_tf.training.sessions). Raises ValueError (or OutputRefused)
    naming the flag; writes nothing. Returns (config, whether output_dir has it, session).
    (The inputs' first records are read once the strategy exists: `options_from_flags`.)"""
    check_flags(f)
    check_paths(f)
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.tasks.pretraining import check_run_config
    from albert_tf.training.sessions import check_settings

    config = AlbertConfig.from_json_file(f.albert_config_file)
    if f.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length ({f.max_seq_length}) exceeds max_position_embeddings "
                         f"({config.max_position_embeddings}) of {f.albert_config_file}.")
    has_config = check_run_config(f.output_dir, config, f.albert_config_file)
    session = option_flags.session(f, RUN_PRETRAINING, trains=f.do_train, tpu=f.strategy == "tpu")
    check_settings(f.output_dir, session)
    return config, has_config, session


def run(f, stream=None):
    """Runs training and/or evaluation as the flags say; returns a dict of results.
    Progress goes to `stream` (default: sys.stdout as it is at the call)."""
    checked = check(f)
    from albert_tf.storage import atomic
    from albert_tf.storage.report import CheckpointMismatchError

    # a run refused for its starting weights (--init_checkpoint) leaves no output_dir it
    # made, and nothing new in one that existed (its albert_config.json, its marker)
    with atomic.removed_if_refused(f.output_dir, CheckpointMismatchError):
        return _run(f, *checked, stream or sys.stdout)


def _run(f, config, has_config, session, stream):
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
    task_options, training = options_from_flags(f, config, session)  # reads the inputs: after the strategy
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


main, entry = entry_points.command(RUN_PRETRAINING.name, define_flags, run)


if __name__ == "__main__":
    entry()
