"""A command's flags made from its options record (albert_tf.storage.options.Command), and
the records made back from the parsed flags, so that no field is mapped by hand.

    COMMAND = Command("run_race", ((MultipleChoiceOptions, None), (TrainingOptions, (...))),
                      defaults={"learning_rate": 1e-5})
    define_command(flag_values, COMMAND)               # a flag per field: name, type, default, help
    task, training = records(flag_values, COMMAND, MultipleChoiceOptions, TrainingOptions)

`define_options` makes flags of one options class alone (the scripts beside the package).
"""

import dataclasses
import sys
import types
import typing

from absl import flags as absl_flags

# absl files a flag under the module that defines it: the first caller outside this module (the
# command's module, or its path when run as `python -m`), not this one
absl_flags.disclaim_key_flags()


def define_command(flag_values, command, module_name=None):
    """Defines the flags of `command` (a storage.options.Command) in `flag_values` (None:
    absl's global FLAGS): one per field, under the command's flag name, with the command's
    default and the field's help and type, filed under the module `module_name` (default: the
    caller's). Returns {flag name: field name}."""
    from absl import flags

    from albert_tf.storage.options import CHOICES

    flag_values = flags.FLAGS if flag_values is None else flag_values

    module = sys.argv[0] if module_name == "__main__" else module_name  # absl names the main module by its path
    made = {}
    for cls, field in command.fields():
        flag_name = command.flag_name(field)
        _define_flag(flag_values, flag_name, _flag_type(cls, field), command.default(field), command.help(field),
                     field.metadata.get(CHOICES), module)
        made[flag_name] = field.name
    return made


def define_options(flag_values, cls, names=None, defaults=None):
    """Makes flags of the options dataclass `cls` alone (every field with help, or `names`),
    with the fields' defaults but for `defaults`: a command whose record is this one class."""
    from albert_tf.storage.options import Command

    return define_command(flag_values, Command(cls.__name__, ((cls, names),), defaults=dict(defaults or {})))


def define_precision(flag_values, default="auto"):
    """--dtype_policy alone (exports and scripts), made from its one source
    (albert_tf.training.precision.PrecisionOptions) with the command's `default`."""
    from albert_tf.training.precision import PrecisionOptions

    return define_options(flag_values, PrecisionOptions, defaults={"dtype_policy": default})


def values(flag_values, command):
    """{field name: value} of the command's flags, as parsed; ValueError naming the first
    flag whose field must be positive and is not (None passes where the default is None)."""
    from albert_tf.storage.options import POSITIVE

    result = {}
    for _, field in command.fields():
        flag_name = command.flag_name(field)
        value = flag_values[flag_name].value
        if field.metadata[POSITIVE] and not (value is None and command.default(field) is None) and not (
                value is not None and value > 0):
            raise ValueError(f"--{flag_name} must be positive, got {value}.")
        result[field.name] = value
    return result


def build(cls, given_values, **given):
    """`cls(**)` from `given_values` ({field name: value}): each init field of `cls` found
    there, and `given` (derived values, e.g. a config read from a file)."""
    fields = {field.name for field in dataclasses.fields(cls) if field.init}
    return cls(**{name: value for name, value in given_values.items() if name in fields and name not in given},
               **given)


def records(flag_values, command, task_cls, training_given=None, **given):
    """(task options, TrainingOptions) of a training command from its parsed flags: every
    field from the flag of its command, `given` (derived values) for the task and
    `training_given` for the driver; the session is the command's (`session`)."""
    from albert_tf.training.options import TrainingOptions

    found = values(flag_values, command)
    task = build(task_cls, found, **given)
    training_given = dict(training_given or {})
    if "session" not in training_given:
        training_given["session"] = session(flag_values, command, trains=found["do_train"],
                                            tpu=task.strategy_and_tpu()[0] == "tpu")
    return task, build(TrainingOptions, found, **training_given)


def session(flag_values, command, trains, tpu=False):
    """The run's albert_tf.training.sessions.Session: its flags as given, its settings (the
    flags whose fields change a result; dtype_policy resolved for this machine or `tpu`,
    paths absolute) and its length."""
    import os

    from albert_tf.storage.options import LENGTH, SETTING
    from albert_tf.training.sessions import PATH_SETTINGS, Session, resolve_policy

    settings = {}
    for name in command.flags_with(SETTING):
        value = flag_values[name].value
        if name == "dtype_policy":
            value = resolve_policy(value, tpu=tpu)
        elif name in PATH_SETTINGS and value:
            value = os.path.abspath(value)
        settings[name] = value
    length = {name: flag_values[name].value for name in command.flags_with(LENGTH)}
    return Session(command=command.name, flags=given_flags(flag_values), settings=settings, length=length,
                   trains=bool(trains), allow_changed_settings=bool(flag_values.allow_changed_settings))


# the flags albert_tf.cli.main adds to every command's own
PROCESS_FLAGS = ("help", "helpshort", "helpfull", "verbosity")


def given_flags(flag_values):
    """{name: value} of every flag the command defined (absl's own left out), as given."""
    found = {}
    for name in flag_values:
        module = flag_values.find_module_defining_flag(name)
        if (flag_values[name].name == name and name not in PROCESS_FLAGS and module is not None
                and not module.startswith("absl")):
            found[name] = flag_values[name].value
    return found


def _flag_type(cls, field):
    kind = field.type
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = args[0] if len(args) == 1 else None
    if kind not in (bool, int, float, str, list):
        raise TypeError(f"{cls.__name__}.{field.name}: {field.type!r} is no flag type (bool, int, float, str, list).")
    return kind


def _define_flag(flag_values, name, kind, default, help_text, choices, module):
    from absl import flags

    args = {"flag_values": flag_values, "module_name": module}
    if choices is not None:
        flags.DEFINE_enum(name, default, list(choices), help_text, **args)
    else:
        define = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
                  str: flags.DEFINE_string, list: flags.DEFINE_list}[kind]
        define(name, default, help_text, **args)
