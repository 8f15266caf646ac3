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

A field without help (`dataclasses.field()` or a plain default) is no flag; a `Command` is a
command's one options record (docs/options.md). Pure Python, in the lowest room.
"""

import dataclasses

HELP = "help"
CHOICES = "choices"
POSITIVE = "positive"  # the value must be > 0 (None allowed where the default is None)
SETTING = "setting"  # changes a training's result: a run continues only with the same
LENGTH = "length"  # the training's length: may change between sessions (recorded)
NAMES = "names"  # {command: flag name} where the release names the flag otherwise
HELPS = "helps"  # {command: help} where a command's flag means more than the field's help says
FLAG_DEFAULT = "flag_default"  # the commands' default where the library's differs


def option(default, help, choices=None, *, positive=False, setting=False, length=False, names=None,
           helps=None, flag_default=dataclasses.MISSING):
    """A dataclass field that a command's flag is made from.

    Args:
        default: the field's default (None, a str, int, float, bool).
        help: the flag's help text.
        choices: the allowed values (the flag is an enum), or None.
        positive: the value must be positive (checked before any work, naming the flag).
        setting: the value changes a training's result (albert_tf.training.sessions).
        length: the value is the training's length (may change when a run continues).
        names: {command name: flag name} where that command's flag keeps the release's name.
        helps: {command name: help} where that command's flag behaves otherwise (run_squad_v1's
            --length_buckets: its loss differs).
        flag_default: the commands' default where it differs from the library's `default`.
    """
    metadata = {HELP: help, POSITIVE: positive, SETTING: setting, LENGTH: length, NAMES: dict(names or {}),
                HELPS: dict(helps or {})}
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
    """The directory a command writes (its task's options and the driver's TrainingOptions
    hold this one field; param_table and the tools take it too, with their defaults)."""

    output_dir: str = option(None, "Where the command writes: a training command, its run (the model checkpoints; "
                                   "required); param_table, param_table.csv; a tool, its files. A new path or the "
                                   "command's own earlier output (a run resumed, files replaced); anything else is "
                                   "refused.")


@dataclasses.dataclass(kw_only=True)
class ModelFiles:
    """The files a model is read from (fine-tuning, pretraining, exports, data tools)."""

    albert_config_file: str = option(None, "The albert_config.json of the (pre-trained) ALBERT model (convert: "
                                           "needed where the source carries no config).")
    spm_model_file: str = option(None, "The SentencePiece model: the data's (create_pretraining_data; run_pretraining, "
                                       "for --export_dir; export_tfhub); fine-tuning with --albert_hub_module_handle, "
                                       "export_litert and convert (written with --to=hf and --to=keras_hub): default "
                                       "the one the export or input carries (spiece.model, spm.model, "
                                       "assets/tokenizer/vocabulary.spm).")


@dataclasses.dataclass(kw_only=True)
class LowerCase:
    """The commands that tokenize text (fine-tuning, data tools, exports)."""

    do_lower_case: bool = option(
        True, "Lower-case the text, as the SentencePiece model and the pretraining data were made (fine-tuning:"
        " must match pretraining, an export carries its own; export_tfhub, export_litert, convert --to=hf"
        " and --to=keras_hub: the written tokenization's).")


# --- what several commands other than the training ones share (one declaration each) --------
@dataclasses.dataclass(kw_only=True)
class OutputFile:
    """The commands that write one file, or a comma-separated list of them."""

    output_file: str = option(
        None, "The file to write: create_pretraining_data, the TF example file (or a comma-separated list of "
        "them); make_squad_data, the SQuAD JSON; make_sample_corpus, the corpus. A new path or the "
        "command's own earlier output (replaced); anything else is refused.")


@dataclasses.dataclass(kw_only=True)
class Output:
    """The commands whose output is one path named --output."""

    output: str = option(
        None, "What the command writes: export_litert, the .tflite file; convert, the output directory; "
        "plot_metrics, the PNG (default RUN_DIR/curves.png). A new path or albert_tf's own earlier output"
        " (replaced); anything else is refused.")


@dataclasses.dataclass(kw_only=True)
class CorpusFile:
    """The task-data tools that can take their text from a corpus of docstring entries."""

    corpus_file: str = option(
        None, "Docstring entries (JSON lines of sample_corpus.write_entries) to take the text from instead of "
        "the fixed corpus: make_squad_data and make_race_data, the functions (default: make_squad_data's "
        "MODULES); make_topic_task, the sentences, labelled by top-level package (default: the fixed "
        "standard-library topics).")


@dataclasses.dataclass(kw_only=True)
class VocabSize:
    """The commands that train a SentencePiece model."""

    vocab_size: int = option(
        30000, "Pieces in the SentencePiece vocabulary.")


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

    def help(self, field):
        """The flag's help in this command."""
        return field.metadata.get(HELPS, {}).get(self.name, field.metadata[HELP])

    def default(self, field):
        """The flag's default in this command."""
        if field.name in self.defaults:
            return self.defaults[field.name]
        return field.metadata.get(FLAG_DEFAULT, field_default(field))

    def flags_with(self, prop):
        """The command's flag names whose field has the property `prop` (SETTING, POSITIVE, LENGTH)."""
        return tuple(self.flag_name(field) for _, field in self.fields() if field.metadata[prop])
