"""The grid of tools/reproduce.py: its settings, the paper's tables as cells, the paper's
numbers (shared/ALBERT_REFERENCE.md section 10) and the claims to test.

A cell is one pretrained architecture and objective, trained with every seed:

    sharing      "all" | "attention" | "ffn" | "none"  (AlbertConfig.sharing)
    embedding    E as a ratio of H: "1/12", "1/6", "1/3" or "1" (the paper's 64, 128,
                 256, 768 at H = 768)
    objective    "sop" | "nsp" | "none" (sentence-level loss), or "random": the
                 random-init control (fine-tuned from random weights, never pretrained)

Tables name their cells; a cell in several tables (all-shared E=1/6 SOP is in all three)
is trained once. Pure Python: nothing here imports TensorFlow.
"""

import dataclasses
import fractions

TABLES = ("sop", "sharing", "embedding")
SHARINGS = ("all", "attention", "ffn", "none")
RATIOS = ("1/12", "1/6", "1/3", "1")
OBJECTIVES = ("none", "nsp", "sop")
PAPER_E = {"1/12": 64, "1/6": 128, "1/3": 256, "1": 768}
SHARING_NAMES = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN", "none": "not-shared"}
OBJECTIVE_NAMES = {"none": "None", "nsp": "NSP", "sop": "SOP", "random": "random init"}
TASKS = ("topic", "squad",
         "race")  # the downstream task kinds (sentence classification, extractive QA, multiple choice)

# The paper's downstream averages (section 10; each table's own numbers).
PAPER_AVG = {
    "embedding": {("none", "1/12"): 81.3, ("none", "1/6"): 81.7, ("none", "1/3"): 81.8, ("none", "1"): 82.3,
                  ("all", "1/12"): 79.0, ("all", "1/6"): 80.1, ("all", "1/3"): 79.6, ("all", "1"): 79.8},
    "sharing": {("all", "1"): 79.8, ("attention", "1"): 81.6, ("ffn", "1"): 79.5, ("none", "1"): 82.3,
                ("all", "1/6"): 80.1, ("attention", "1/6"): 81.7, ("ffn", "1/6"): 80.2, ("none", "1/6"): 81.6},
}
# The sentence-level table: only the intrinsic cells the reference gives (others are left out).
PAPER_SENTENCE = {("nsp", "sop_accuracy"): 52.0, ("sop", "nsp_accuracy"): 78.9, ("sop", "sop_accuracy"): 86.5}


@dataclasses.dataclass(frozen=True)
class Cell:
    sharing: str
    ratio: str
    objective: str

    @property
    def id(self):
        return f"{self.sharing}-e{self.ratio.replace('/', 'of')}-{self.objective}"

    @property
    def pretrained(self):
        return self.objective != "random"

    def label(self):
        """e.g. "all-shared E=H/6 SOP"."""
        return f"{SHARING_NAMES[self.sharing]} E={e_label(self.ratio)} {OBJECTIVE_NAMES[self.objective]}"


def e_label(ratio):
    """"1" -> "H", "1/6" -> "H/6"."""
    return "H" if ratio == "1" else f"H/{ratio.split('/')[1]}"


BASE = Cell("all", "1/6", "sop")  # ALBERT-base's own layout, in every table
CONTROL = Cell("all", "1/6", "random")


def table_cells(table):
    """The cells of one table, in the paper's row order."""
    if table == "sop":
        return [Cell("all", "1/6", o) for o in OBJECTIVES]
    if table == "sharing":
        return [Cell(s, r, "sop") for r in ("1", "1/6") for s in ("all", "attention", "ffn", "none")]
    if table == "embedding":
        return [Cell(s, r, "sop") for s in ("none", "all") for r in RATIOS]
    raise ValueError(f"unknown table {table!r}; expected some of {', '.join(TABLES)}.")


def grid_cells(tables):
    """Every cell of `tables` once (first appearance order), then the random-init control."""
    cells = []
    for table in tables:
        cells += [c for c in table_cells(table) if c not in cells]
    return cells + [CONTROL]


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a grid is trained with. Two runs with different settings never share an
    output directory (the settings are written there and compared on resume).

    Attributes:
        tables: tuple of TABLES.
        seeds: seeds per cell (1, 2, ...; pretraining and fine-tuning use seed k).
        hidden_size, num_attention_heads, num_hidden_layers: H, heads, L (intermediate 4H).
        max_seq_length, max_predictions_per_seq, vocab_size: pretraining data.
        pretrain_steps, pretrain_batch_size, pretrain_learning_rate: every cell's budget.
        finetune_steps, finetune_batch_size, finetune_learning_rate: every fine-tuning run.
        topic_learning_rate: the topic classification task's own rate (at 5e-4 the first default
            run collapsed 5 of its 30 topic runs to one class; at 1e-4 none of a pilot's runs did
            and 1 of the rerun's 30, docs/reproduction.md).
        corpus_mb: MB of docstring text (0: everything found).
        held_out_percent: share of documents held out (evaluation sets and tasks).
        dtype_policy: "auto", "float32" or "mixed_bfloat16"; the runner resolves "auto" for
            its machine before the grid is stored or compared (a grid resumed elsewhere
            computes in the same policy or is refused).
    """

    tables: tuple = TABLES
    seeds: int = 3  # reproduce_stats.MIN_SEEDS: fewer leave every claim "not testable"
    hidden_size: int = 96
    num_attention_heads: int = 4
    num_hidden_layers: int = 4
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    vocab_size: int = 8000
    pretrain_steps: int = 400
    pretrain_batch_size: int = 64
    pretrain_learning_rate: float = 0.005
    finetune_steps: int = 150
    finetune_batch_size: int = 32
    finetune_learning_rate: float = 5e-4
    topic_learning_rate: float = 1e-4
    corpus_mb: float = 0.0
    held_out_percent: int = 10
    dtype_policy: str = "auto"

    def validate(self):
        """ValueError naming the flag of the first bad setting."""
        bad = [t for t in self.tables if t not in TABLES]
        if bad or not self.tables:
            raise ValueError(f"--tables: unknown table(s) {', '.join(bad) or '(none given)'}; expected some of "
                             f"{', '.join(TABLES)}.")
        for name in ("seeds", "hidden_size", "num_attention_heads", "num_hidden_layers", "max_seq_length",
                     "max_predictions_per_seq", "pretrain_steps", "pretrain_batch_size", "finetune_steps",
                     "finetune_batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"the hidden size {self.hidden_size} does not divide into {self.num_attention_heads} "
                             "attention heads; pick a --width (or --num_attention_heads) whose hidden size is a "
                             "multiple of the heads.")
        if self.hidden_size % 12:
            raise ValueError(f"the hidden size {self.hidden_size} is not a multiple of 12, so the paper's E/H ratios "
                             f"(1/12, 1/6, 1/3, 1) give no whole embedding sizes; pick another --width.")
        if not 1 <= self.held_out_percent <= 50:
            raise ValueError(f"--held_out_percent must be in [1, 50], got {self.held_out_percent}.")

    def embedding_size(self, ratio):
        return int(self.hidden_size * fractions.Fraction(ratio))

    def albert_config(self, cell):
        """The albert_config.json values of a cell (no dropout, as the release's v2 configs)."""
        return {
            "attention_probs_dropout_prob": 0.0, "hidden_dropout_prob": 0.0, "hidden_act": "gelu",
            "embedding_size": self.embedding_size(cell.ratio), "hidden_size": self.hidden_size,
            "initializer_range": 0.02, "inner_group_num": 1, "intermediate_size": 4 * self.hidden_size,
            "max_position_embeddings": self.max_seq_length, "num_attention_heads": self.num_attention_heads,
            "num_hidden_groups": 1, "num_hidden_layers": self.num_hidden_layers, "sharing": cell.sharing,
            "type_vocab_size": 2, "vocab_size": self.vocab_size,
        }

    def to_dict(self):
        values = dataclasses.asdict(self)
        values["tables"] = list(self.tables)
        return values

    @classmethod
    def from_dict(cls, values):
        values = dict(values)
        values["tables"] = tuple(values["tables"])
        return cls(**values)
