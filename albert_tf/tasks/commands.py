"""The module functions of a fine-tuning command (run_classifier, run_race, run_squad_v1,
run_squad_v2), made once from its options record (`fine_tuning_command`); importable without
TensorFlow: `run` imports the task's module."""

import importlib

from albert_tf import entry_points, option_flags


def fine_tuning_command(module_name, commands, options_class, task, variant=None):
    """(define_flags, options_from_flags, check_flags, run, main, entry) of the command module
    `module_name` (its flags are filed under it, its docstring is the help).

    Args:
        commands: {variant: options record (albert_tf.storage.options.Command)} of the commands
            this code serves: {None: COMMAND}, or SQuAD's {"v1": ..., "v2": ...}, whose variant
            is the options' `version`.
        options_class: the task's options dataclass.
        task: "module:Class" of its FineTuningTask.
        variant: this module's; the functions take another as their last argument.
    """
    def define_flags(flag_values, version=variant):
        option_flags.define_command(flag_values, commands[version], module_name=module_name)

    def options_from_flags(f, version=variant):
        """-> (task options, TrainingOptions), every field from its flag (the record's positive
        values checked); a command without --eval_batch_size (SQuAD) evaluates in
        --predict_batch_size."""
        command = commands[version]
        given = {} if version is None else {"version": version}
        own_eval_batch = "eval_batch_size" in {field.name for _, field in command.fields()}
        training_given = None if own_eval_batch else {"eval_batch_size": f.predict_batch_size}
        return option_flags.records(f, command, options_class, training_given=training_given, **given)

    def check_flags(f, version=variant):
        """The checks of the training values alone (tasks.common.check_training; the task's
        check_options runs them with the rest before any work)."""
        from albert_tf.tasks.common import check_training

        check_training(*options_from_flags(f, version))

    def run(f, stream=None, version=variant):
        """Checks, trains, evaluates, predicts and exports as the flags say; returns a dict of
        results (albert_tf.tasks.fine_tuning.run)."""
        from albert_tf.tasks import fine_tuning

        options, training = options_from_flags(f, version)
        task_module, task_class = task.split(":")
        return fine_tuning.run(getattr(importlib.import_module(task_module), task_class), options, training,
                               stream=stream)

    for function in (options_from_flags, check_flags, run):
        function.__module__ = module_name  # albert_tf.cli prints the docstring of run's module as the help
    main, entry = entry_points.command(commands[variant].name, define_flags, run)
    return define_flags, options_from_flags, check_flags, run, main, entry
