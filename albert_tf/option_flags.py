"""A command's flags made from an options dataclass (`define_options`, also
`albert_tf.cli.define_options`): each field with help (albert_tf.storage.options.option /
required) is a flag with the field's default and help, so a default is written once.

    cli.define_options(flag_values, ClassificationOptions)       # a flag per field with help
    cli.define_options(flag_values, TrainingOptions, names=("learning_rate", "num_train_steps"),
                       flag_names={"num_train_steps": "train_step"})  # the release's flag name
"""

import dataclasses
import sys
import types
import typing


def define_options(flag_values, cls, names=None, exclude=(), flag_names=None, helps=None):
    """Makes a command's flags from the options dataclass `cls`: one flag per field that
    has help (albert_tf.storage.options.option / required), with the field's default and
    help, so each default is written once, in the field.

    The flag's type comes from the field's annotation: bool, int, float, str (an enum when
    the field has choices), list (comma-separated), or Optional[one of them]. Each flag is
    registered under the module that calls this (its section of --helpfull).

    Args:
        flag_values: the absl FlagValues to define them in.
        cls: an options dataclass (e.g. tasks.options.ClassificationOptions,
            training.options.TrainingOptions).
        names: the fields to make flags of (default: every field with help), in any order.
        exclude: fields with help to leave out (e.g. run_squad_v1 without the v2 head's).
        flag_names: {field name: flag name} where the flag keeps the release's name
            (e.g. {"num_train_steps": "train_step"}).
        helps: {field name: help} where a command words the help its own way (the
            default stays the field's).
    Returns:
        {flag name: field name} of the flags defined.
    Raises:
        TypeError: for a field without help, or an annotation that is no flag type.
    """
    from albert_tf.storage.options import CHOICES, HELP, field_default, has_flag

    fields = {field.name: field for field in dataclasses.fields(cls)}
    chosen = [name for name, field in fields.items() if has_flag(field)] if names is None else list(names)
    module = _caller_module_name()
    made = {}
    for name in chosen:
        if name in exclude:
            continue
        field = fields[name]
        if not has_flag(field):
            raise TypeError(f"{cls.__name__}.{name} has no help: it is no flag (albert_tf.storage.options).")
        flag_name = (flag_names or {}).get(name, name)
        help_text = (helps or {}).get(name, field.metadata[HELP])
        _define_flag(flag_values, flag_name, _flag_type(cls, field), field_default(field), help_text,
                     field.metadata.get(CHOICES), module)
        made[flag_name] = name
    return made


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


def _caller_module_name():
    """The name absl gives the module that called the caller (the command's, or its path
    when run as `python -m`, as absl names the main module)."""
    name = sys._getframe(2).f_globals.get("__name__")
    return sys.argv[0] if name == "__main__" else name
