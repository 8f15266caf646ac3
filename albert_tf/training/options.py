"""How the driver runs a task (`TrainingOptions`), importable without TensorFlow: the
training commands make their flags from these fields (albert_tf.cli.define_options) before
anything heavy is imported. A command whose default differs from a field's here (e.g.
run_race's --learning_rate=1e-5) gives that field to its own task options
(albert_tf.tasks.options), so each flag's default is written once."""

import dataclasses

from albert_tf.storage.options import option, required
from albert_tf.training.accumulation import FLAG_HELP as ACCUMULATION_HELP

REMAT_HELP = ("Rematerialization: the backward pass keeps only the input of each application of the encoder's "
              "shared (attention, feed-forward) block and recomputes the rest of its forward from it, instead of "
              "keeping every application's activations: less activation memory for one more forward of the encoder "
              "per step. The gradients are the plain run's (within float rounding; dropout masks are redrawn "
              "identically). Composes with --gradient_accumulation_steps, --dtype_policy and padding skipping.")
OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass
class TrainingOptions:
    """How the driver runs a task (entry points fill it from their flags). A field with help
    is the source of the flag of its name (or the release's name: --train_step,
    --warmup_step, --num_keep_checkpoint) in the commands that take it from here.

    Attributes:
        output_dir: the run directory (checkpoints, metrics, results).
        train_batch_size, eval_batch_size: global batches G (G of one optimizer step).
        gradient_accumulation_steps: K; each replica's batch of a step is computed in K
            slices one after another and their gradients summed (the same step, one
            slice's activations alive at a time; K divides the per-replica batch).
        num_train_steps, num_warmup_steps, start_warmup_step, poly_power, learning_rate:
            the release's schedule (linear warmup, then polynomial decay to 0).
        optimizer: "lamb" or "adamw".
        clip_norm: global gradient norm after the cross-replica sum.
        save_checkpoints_steps, keep_checkpoint_max, iterations_per_loop: as the release.
        do_train, do_eval: what to run.
        evaluate_every_checkpoint: evaluate after every save (fine-tuning) or only at the
            end (pretraining, as the release).
        max_eval_steps: at most this many eval batches (None: every example).
        keep_best: keep the best checkpoint by task.best_metric in output_dir/best and
            end with its weights restored.
        jit_compile: compile forward + backward with XLA.
        remat: rematerialization: in the backward pass each application of an encoder's
            sub-layer (attention or feed-forward) is recomputed from its input instead of
            keeping its activations (docs/design_encoder.md#rematerialization); the same
            gradients.
        write_curves: write training_curves.png at the end.
        dtype_policy: "auto", "float32" or "mixed_bfloat16" (training/precision.py: the
            Trainer resolves it for its hardware and builds the model in it). The commands'
            --dtype_policy (default auto) is their task options' field (precision.policy_option).
        session: the command's `sessions.Session` (its flags and settings, checked
            before any work by sessions.check_settings) recorded in run_info.json's
            sessions; None: a session of the task's name without flags.
    """

    output_dir: str = required("The output directory where the model checkpoints will be written: a new path or "
                               "albert_tf's own run (resumed); anything else is refused.")
    train_batch_size: int = option(32, "Total batch size for training.")
    eval_batch_size: int = option(8, "Total batch size for eval.")
    num_train_steps: int = option(1000, "Total number of training steps to perform.")
    num_warmup_steps: int = option(0, "Number of steps to perform linear learning rate warmup for.")
    start_warmup_step: int = option(0, "The starting step of warmup.")
    poly_power: float = option(1.0, "The power of poly decay.")
    learning_rate: float = option(5e-5, "The initial learning rate for the optimizer.")
    optimizer: str = option("adamw", "Optimizer for fine-tuning.", choices=OPTIMIZERS)
    clip_norm: float = 1.0
    save_checkpoints_steps: int = option(1000, "How often to save a checkpoint (and evaluate with --do_eval).")
    keep_checkpoint_max: int = option(5, "How many checkpoints to keep.")
    iterations_per_loop: int = option(100, "Steps per tf.function call (and per progress line).")
    do_train: bool = option(True, "Whether to run training.")
    do_eval: bool = option(True, "Whether to run eval on the dev set.")
    evaluate_every_checkpoint: bool = False
    max_eval_steps: int = None
    keep_best: bool = False
    jit_compile: bool = option(False, "Compile the train step with XLA.")
    write_curves: bool = True
    dtype_policy: str = "float32"
    gradient_accumulation_steps: int = option(1, ACCUMULATION_HELP)
    remat: bool = option(False, REMAT_HELP)
    session: object = None
