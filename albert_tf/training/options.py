"""How the driver runs a task (`TrainingOptions`), importable without TensorFlow: each field
with help is the one source of the training flag of its name in every training command
(albert_tf.option_flags; a command's record takes the fields it offers and overrides only a
default where the release's command differs, e.g. run_race's --learning_rate=1e-5)."""

import dataclasses

from albert_tf.storage.options import RunDirectory, option
from albert_tf.training.accumulation import FLAG_HELP as ACCUMULATION_HELP
from albert_tf.training.precision import PrecisionOptions

REMAT_HELP = ("Rematerialization: the backward pass keeps only the input of each application of the encoder's "
              "shared (attention, feed-forward) block and recomputes the rest of its forward from it, instead of "
              "keeping every application's activations: less activation memory for one more forward of the encoder "
              "per step. The gradients are the plain run's (within float rounding; dropout masks are redrawn "
              "identically). Composes with --gradient_accumulation_steps, --dtype_policy and padding skipping.")
ALLOW_HELP = ("Continue the training in --output_dir although a setting that changes its result (learning rate and "
              "schedule, batch size, warmup, resolved dtype policy, accumulation steps, sequence length, optimizer, "
              "seed, starting weights) differs from its previous training session's; the change is recorded in "
              "run_info.json. Without it such a run is refused (exit status 2): a new run takes a new --output_dir. "
              "A longer or shorter training is always allowed (and recorded).")
OPTIMIZERS = ("adamw", "lamb")
# the release's fine-tuning scripts' names of the schedule's flags
_STEP = {"run_classifier": "train_step", "run_race": "train_step"}
_WARMUP = {"run_classifier": "warmup_step", "run_race": "warmup_step"}


@dataclasses.dataclass(kw_only=True)
class TrainingOptions(RunDirectory, PrecisionOptions):
    """How the driver runs a task (entry points fill it from their flags by field name).

    Attributes:
        output_dir: the run directory (checkpoints, metrics, results).
        train_batch_size, eval_batch_size: global batches G (G of one optimizer step).
        gradient_accumulation_steps: K; each replica's batch of a step is computed in K
            slices one after another and their gradients summed (K divides the per-replica batch).
        num_train_steps, num_warmup_steps, start_warmup_step, poly_power, learning_rate:
            the release's schedule (linear warmup, then polynomial decay to 0).
        optimizer: "lamb" or "adamw".
        clip_norm: global gradient norm after the cross-replica sum.
        save_checkpoints_steps, keep_checkpoint_max, iterations_per_loop: as the release.
        do_train, do_eval: what to run (the flags are the task options' fields).
        evaluate_every_checkpoint: evaluate after every save (fine-tuning) or only at the end.
        max_eval_steps: at most this many eval batches (None: every example).
        keep_best: keep the best checkpoint by task.best_metric in output_dir/best and
            end with its weights restored.
        jit_compile: compile forward + backward with XLA.
        remat: recompute each application of an encoder's sub-layer in the backward pass
            from its input (docs/design_encoder.md#rematerialization); the same gradients.
        write_curves: write training_curves.png at the end.
        dtype_policy: "auto", "float32" or "mixed_bfloat16" (training/precision.py).
        allow_changed_settings: a changed setting continues the run (albert_tf.training.sessions).
        session: the command's `sessions.Session` recorded in run_info.json; None: a
            session of the task's name without flags.
    """

    train_batch_size: int = option(32, "Total batch size for training.", positive=True, setting=True)
    eval_batch_size: int = option(8, "Total batch size for eval.", positive=True)
    num_train_steps: int = option(1000, "Total number of training steps to perform.", positive=True, length=True,
                                  names=_STEP)
    num_warmup_steps: int = option(0, "Number of steps to perform linear learning rate warmup for.", setting=True,
                                   names=_WARMUP)
    start_warmup_step: int = option(0, "The starting step of warmup.", setting=True)
    poly_power: float = option(1.0, "The power of poly decay.", setting=True)
    learning_rate: float = option(5e-5, "The initial learning rate for the optimizer.", positive=True, setting=True)
    optimizer: str = option("adamw", "The optimizer for training.", choices=OPTIMIZERS, setting=True)
    clip_norm: float = 1.0
    save_checkpoints_steps: int = option(1000, "How often to save a checkpoint (and evaluate with --do_eval).",
                                         positive=True)
    keep_checkpoint_max: int = option(5, "How many checkpoints to keep.", positive=True,
                                      names={"run_race": "num_keep_checkpoint"})
    iterations_per_loop: int = option(100, "Steps per tf.function call (and per progress line).", positive=True)
    do_train: bool = True
    do_eval: bool = True
    evaluate_every_checkpoint: bool = False
    max_eval_steps: int = option(None, "Maximum number of eval steps.", positive=True)
    keep_best: bool = False
    jit_compile: bool = option(False, "Compile with XLA: training, the train step; export_tfhub, serving (the "
                                      "encoder's serve and serving_default run as one compiled program, compiled "
                                      "once per new [batch, length] shape in the loading process; the root __call__ "
                                      "that hub.KerasLayer fine-tunes is unchanged).")
    write_curves: bool = True
    gradient_accumulation_steps: int = option(1, ACCUMULATION_HELP, setting=True)
    remat: bool = option(False, REMAT_HELP)
    allow_changed_settings: bool = option(False, ALLOW_HELP)
    session: object = None
