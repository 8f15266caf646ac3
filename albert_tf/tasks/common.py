"""What the fine-tuning tasks share: where a run's albert_config.json comes from, the
checks of their options (training values, model source, outputs), the start of a run
(seed, strategy, output directory), the encoder a model is built on, its starting weights
and the warning for a random start. (Their batches come from albert_tf.data.buckets.)"""

import os
import sys
from albert_tf.storage import files


def config_file_for(o):
    """The albert_config.json: --albert_config_file, the export's, or the one in an
    --init_checkpoint directory; None when none."""
    if o.albert_config_file:
        return o.albert_config_file
    if o.albert_hub_module_handle:
        return files.join(o.albert_hub_module_handle, "encoder", "assets", "albert_config.json")
    if o.init_checkpoint and files.isdir(o.init_checkpoint):
        candidate = files.join(o.init_checkpoint, "albert_config.json")
        if files.isfile(candidate):
            return candidate
    return None


def spm_file_for(o):
    """--spm_model_file, else the SentencePiece model inside an --albert_hub_module_handle export."""
    if o.spm_model_file:
        return o.spm_model_file
    if o.albert_hub_module_handle:
        candidate = files.join(o.albert_hub_module_handle, "encoder", "assets", "spm.model")
        if files.isfile(candidate):
            return candidate
    return None


def check_training(o, training):
    """A fine-tuning command's checks of its training values: --dtype_policy,
    --gradient_accumulation_steps (which must divide --train_batch_size), --warmup_step in
    [0, --train_step] (not for SQuAD: --warmup_proportion), --strategy (one machine: not
    multi_worker_mirrored, docs/fine_tuning.md) and --use_tpu's address. Raises ValueError
    naming the flag; writes nothing."""
    from albert_tf.tasks.options import FINE_TUNING_STRATEGIES
    from albert_tf.training.accumulation import check_accumulation
    from albert_tf.training.precision import check_policy

    check_policy(training.dtype_policy)
    check_accumulation(training.gradient_accumulation_steps, training.train_batch_size)
    if not hasattr(o, "warmup_proportion") and not 0 <= training.num_warmup_steps <= training.num_train_steps:
        raise ValueError(f"--warmup_step must be in [0, --train_step={training.num_train_steps}], got "
                         f"{training.num_warmup_steps}.")
    if o.strategy not in FINE_TUNING_STRATEGIES:
        tpu = "; a TPU: --use_tpu with --tpu_name" if hasattr(o, "use_tpu") else ""
        raise ValueError(f"--strategy must be one of {', '.join(FINE_TUNING_STRATEGIES)}, got {o.strategy!r}: "
                         f"fine-tuning runs on one machine (--strategy=mirrored uses all its devices{tpu}).")
    if getattr(o, "use_tpu", False) and not (o.tpu_name or o.master):
        raise ValueError("--use_tpu needs --tpu_name (or --master).")


def check_model_source(o):
    """Checks where a fine-tuning run's model comes from (--albert_hub_module_handle or
    --init_checkpoint, --spm_model_file, --albert_config_file) and that --max_seq_length
    fits its position embeddings; raises ValueError naming the flag."""
    from albert_tf.modeling.config import AlbertConfig

    if o.albert_hub_module_handle and o.init_checkpoint:
        raise ValueError("give --albert_hub_module_handle or --init_checkpoint, not both.")
    if o.albert_hub_module_handle:
        config = files.join(o.albert_hub_module_handle, "encoder", "assets", "albert_config.json")
        if not files.isfile(config):
            raise ValueError(f"--albert_hub_module_handle={o.albert_hub_module_handle}: no encoder/assets/"
                             "albert_config.json; expected the directory written by albert_tf.export_tfhub.")
    spm = spm_file_for(o)
    if not spm:
        raise ValueError("--spm_model_file is required (the SentencePiece model of the pretrained model).")
    if not files.isfile(spm):
        raise ValueError(f"--spm_model_file={spm} does not exist.")
    config_path = config_file_for(o)
    if not config_path:
        raise ValueError("--albert_config_file is required (or an --init_checkpoint directory holding "
                         "albert_config.json, or --albert_hub_module_handle).")
    if not files.isfile(config_path):
        raise ValueError(f"--albert_config_file={config_path} does not exist.")
    positions = AlbertConfig.from_json_file(config_path).max_position_embeddings
    if o.max_seq_length > positions:
        raise ValueError(f"--max_seq_length ({o.max_seq_length}) exceeds max_position_embeddings ({positions}) of "
                         f"{config_path}; use --max_seq_length={positions} or less.")


def check_outputs(o, caches=(), inputs=()):
    """Checks --length_buckets and every output of a fine-tuning run before anything is
    written, under albert_tf.storage.outputs' rule: --output_dir a run (resumed), --export_dir
    and the feature caches replaced; the inputs are the model source, config, SentencePiece
    model and data; the chief holds the outputs (a run that does not train does not hold
    the run). Raises ValueError naming the flag.

    Args:
        o: the task's options (output_dir, export_dir and the model-source fields).
        caches: (flag, path, used) of the task's feature caches; unused ones are skipped.
        inputs: (flag, path) of the task's data inputs.
    """
    from albert_tf.data.bucket_widths import bucket_widths
    from albert_tf.storage import lock, outputs

    bucket_widths(o.max_seq_length, o.length_buckets)  # names a bad --length_buckets
    found = [outputs.Input(f"--{name}", getattr(o, name)) for name in
             ("init_checkpoint", "albert_hub_module_handle", "albert_config_file", "spm_model_file")]
    found += [outputs.Input(f"--{flag}", path) for flag, path in inputs]
    chief = lock.leads(o.strategy_and_tpu()[0])
    outputs.check([outputs.Output("--output_dir", o.output_dir, outputs.RUN, held=chief and o.do_train),
                   outputs.Output("--export_dir", o.export_dir, outputs.EXPORT, held=chief),
                   *(outputs.Output(f"--{flag}", path, outputs.FEATURE_CACHE) for flag, path, used in caches if used)],
                  found)


def start_run(o):
    """After every check, before any work: seeds Keras (--random_seed), makes the
    tf.distribute strategy (o.strategy_and_tpu(): --strategy, or --use_tpu's) and claims
    --output_dir (checked in check_outputs: created, or kept, and marked as albert_tf's
    run). Returns the strategy."""
    import keras

    from albert_tf.storage.outputs import claim_run
    from albert_tf.training.distribution import get_strategy

    keras.utils.set_random_seed(o.random_seed)
    strategy = get_strategy(*o.strategy_and_tpu())
    claim_run(o.output_dir)
    return strategy


def random_start(o):
    """Warns that the run starts from random weights (a run that does not train: that it
    evaluates or predicts with them); returns "random" (eval_results.json's initialized_from)."""
    if getattr(o, "do_train", True):
        print("WARNING: no --init_checkpoint and no --albert_hub_module_handle: fine-tuning starts from random "
              "weights (eval_results.json records initialized_from: random).", file=sys.stderr, flush=True)
    else:
        print(f"WARNING: no trained checkpoint in --output_dir={o.output_dir}, no --init_checkpoint and no "
              "--albert_hub_module_handle: evaluating and predicting with random weights (eval_results.json "
              "records initialized_from: random).", file=sys.stderr, flush=True)
    return "random"


def encoder_for(o):
    """(encoder, pretrainer) a fine-tuning model is built on: the encoder of an albert_tf
    export (--albert_hub_module_handle; pretrainer None) or of a new AlbertPretrainer
    whose checkpoint --init_checkpoint may fill (`initialize_from`)."""
    if o.albert_hub_module_handle:
        from albert_tf.export.exporter import load_encoder

        return load_encoder(o.albert_hub_module_handle), None
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    pretrainer = AlbertPretrainer(AlbertConfig.from_json_file(config_file_for(o)))
    return pretrainer.encoder, pretrainer


def initialize_from(o, model, pretrainer, weights_file, check_directory):
    """Starting weights of a fine-tuning model; returns where they came from.

    --albert_hub_module_handle: already in the encoder (encoder_for). --init_checkpoint: a
    directory holding the task's `weights_file` (its own fine-tuned model;
    `check_directory(dir)` may refuse it first) is loaded whole; anything else is read into
    `pretrainer` (a run_pretraining output_dir, a ckpt-N prefix, a pretrained directory), an
    unreadable or mismatched checkpoint an error naming the variables. Neither: a warning
    and "random".
    """
    if o.albert_hub_module_handle:
        return os.path.abspath(o.albert_hub_module_handle)
    if o.init_checkpoint:
        weights = files.join(o.init_checkpoint, weights_file or "")
        if weights_file and files.isdir(o.init_checkpoint) and files.isfile(weights):
            check_directory(o.init_checkpoint)
            from albert_tf.storage.weights_file import load_weights_file

            load_weights_file(model, weights, "--init_checkpoint")
            return os.path.abspath(weights)
        from albert_tf.training.checkpoints import load_init_checkpoint

        return load_init_checkpoint(pretrainer, o.init_checkpoint)
    return random_start(o)
