"""A setting declared once: an options dataclass's field carries its default and its help,
and a command's flag is made from it (albert_tf.cli.define_options), so no default is
written twice.

    @dataclasses.dataclass
    class SomeOptions:
        output_dir: str = required("Where the run writes.")        # flag default None
        max_seq_length: int = option(512, "Maximum input length.")  # --max_seq_length=512
        optimizer: str = option("adamw", "The optimizer.", choices=("adamw", "lamb"))

A field without help (`dataclasses.field()` or a plain default) is no flag. Pure Python:
this module is in the lowest room so that every room's options can use it.
"""

import dataclasses

HELP = "help"
CHOICES = "choices"


def option(default, help, choices=None):
    """A dataclass field that a command's flag is made from.

    Args:
        default: the field's default, which is the flag's (None, a str, int, float, bool).
        help: the flag's help text.
        choices: the allowed values (the flag is an enum), or None.
    """
    metadata = {HELP: help}
    if choices is not None:
        metadata[CHOICES] = tuple(choices)
    return dataclasses.field(default=default, metadata=metadata)


def required(help):
    """A dataclass field without a default (the caller must give it) whose flag has
    default None and `help`."""
    return dataclasses.field(metadata={HELP: help})


def has_flag(field):
    """Whether a dataclasses.Field is made into a flag (it has help)."""
    return HELP in field.metadata


def field_default(field):
    """The default of a dataclasses.Field (None when the field has none)."""
    return None if field.default is dataclasses.MISSING else field.default
