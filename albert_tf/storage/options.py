"""A setting declared once: an options dataclass's field carries its default, its help and
its properties, and every command's flag is made from it (albert_tf.option_flags), so no
default, help or property is written twice.

    @dataclasses.dataclass(kw_only=True)
    class SomeOptions:
        output_dir: str = required("Where the run writes.")        # flag default None
        max_seq_length: int = option(512, "Maximum input length.", positive=True, setting=True)
        optimizer: str = option("adamw", "The optimizer.", choices=("adamw", "lamb"))
        num_train_steps: int = option(1000, "Steps.", names={"run_race": "train_step"}, length=True)

    SOME = Command("some_command", ((SomeOptions, None),), defaults={"max_seq_length": 128})

A field without help (`dataclasses.field()` or a plain default) is no flag. A `Command` is a
command's one options record: the options classes it takes fields from (all with help, or
the names given), and the defaults where its default differs from the field's. Pure Python:
this module is in the lowest room so that every room's options can use it.
"""

import dataclasses

HELP = "help"
CHOICES = "choices"
POSITIVE = "positive"  # the value must be > 0 (None allowed where the default is None)
SETTING = "setting"  # changes a training's result: a run continues only with the same
LENGTH = "length"  # the training's length: may change between sessions (recorded)
NAMES = "names"  # {command: flag name} where the release names the flag otherwise
FLAG_DEFAULT = "flag_default"  # the commands' default where the library's differs


def option(default, help, choices=None, *, positive=False, setting=False, length=False, names=None,
           flag_default=dataclasses.MISSING):
    """A dataclass field that a command's flag is made from.

    Args:
        default: the field's default (None, a str, int, float, bool).
        help: the flag's help text.
        choices: the allowed values (the flag is an enum), or None.
        positive: the value must be positive (checked before any work, naming the flag).
        setting: the value changes a training's result (albert_tf.training.sessions).
        length: the value is the training's length (may change when a run continues).
        names: {command name: flag name} where that command's flag keeps the release's name.
        flag_default: the commands' default where it differs from the library's `default`.
    """
    metadata = {HELP: help, POSITIVE: positive, SETTING: setting, LENGTH: length, NAMES: dict(names or {})}
    if choices is not None:
        metadata[CHOICES] = tuple(choices)
    if flag_default is not dataclasses.MISSING:
        metadata[FLAG_DEFAULT] = flag_default
    return dataclasses.field(default=default, metadata=metadata)


def required(help, **properties):
    """A dataclass field without a default (the caller must give it) whose flag has
    default None and `help` (`properties` as `option`'s)."""
    field = option(None, help, **properties)
    return dataclasses.field(metadata=field.metadata)


@dataclasses.dataclass(kw_only=True)
class RunDirectory:
    """The run directory of a training command: its task's options and the driver's
    TrainingOptions hold this one field."""

    output_dir: str = option(None, "The output directory where the model checkpoints will be written: a new path or "
                                   "albert_tf's own run (resumed); anything else is refused (required).")


def has_flag(field):
    """Whether a dataclasses.Field is made into a flag (it has help)."""
    return HELP in field.metadata


def field_default(field):
    """The default of a dataclasses.Field (None when the field has none)."""
    return None if field.default is dataclasses.MISSING else field.default


@dataclasses.dataclass(frozen=True)
class Command:
    """A command's one options record.

    Attributes:
        name: the command's name (its module's, e.g. "run_race").
        records: ((options class, field names or None for every field with help), ...), in
            the order of --helpfull.
        defaults: {field name: default} where this command's default differs from the field's.
    """

    name: str
    records: tuple
    defaults: dict = dataclasses.field(default_factory=dict)

    def fields(self):
        """[(options class, dataclasses.Field)] of the command's flags, in order."""
        chosen, seen = [], {}
        for cls, names in self.records:
            fields = {field.name: field for field in dataclasses.fields(cls)}
            for name in (names if names is not None else [n for n, f in fields.items() if has_flag(f)]):
                if not has_flag(fields[name]):
                    raise TypeError(f"{cls.__name__}.{name} has no help: it is no flag (albert_tf.storage.options).")
                if name in seen:  # a field two records inherit from one class is one flag
                    if seen[name] is not fields[name]:
                        raise TypeError(f"{self.name}: {name} is declared by two options classes.")
                    continue
                seen[name] = fields[name]
                chosen.append((cls, fields[name]))
        unknown = set(self.defaults) - {field.name for _, field in chosen}
        if unknown:
            raise TypeError(f"{self.name}: defaults for fields it has no flag of: {', '.join(sorted(unknown))}.")
        return chosen

    def flag_name(self, field):
        """The flag of a field in this command (the release's name where it has one)."""
        return field.metadata[NAMES].get(self.name, field.name)

    def default(self, field):
        """The flag's default in this command."""
        if field.name in self.defaults:
            return self.defaults[field.name]
        return field.metadata.get(FLAG_DEFAULT, field_default(field))

    def flags_with(self, prop):
        """The command's flag names whose field has the property `prop` (SETTING, POSITIVE, LENGTH)."""
        return tuple(self.flag_name(field) for _, field in self.fields() if field.metadata[prop])
