"""Re-runs the paper's ablations small, with error bars, in this process through the project's own
commands: sentence-level loss, cross-layer sharing, embedding size, pretrained against random init.

    python tools/reproduce.py --output_dir=repro                      # the default grid
    python tools/reproduce.py --quick --output_dir=/tmp/repro_quick   # the pipeline in minutes

A finished grid, run again with the same command, runs no step (every step has its record) and writes
results.json and the report anew by today's rule. The protocol, the verdict rule (RULE), resumption and the
files: docs/reproduction.md.
"""

import collections
import contextlib
import dataclasses
import functools
import gc
import math
import os
import statistics
import time
import zlib

from absl import flags

from albert_tf import cli, entry_points, option_flags
from albert_tf.storage import atomic, outputs
from albert_tf.storage.json_files import read_json
from albert_tf.storage.options import Command, RunDirectory, option
from albert_tf.training.precision import PrecisionOptions

if __package__:  # imported as tools.reproduce
    from . import make_squad_data, make_topic_task
else:  # `python tools/reproduce.py`: tools/ is sys.path[0]
    import make_squad_data
    import make_topic_task

TABLES = ("sop", "sharing", "embedding")  # the paper's ablations (shared/ALBERT_REFERENCE.md section 10)
TITLES = {"sop": "Sentence-level loss (all-shared, E=H/6)", "sharing": "Cross-layer sharing",
          "embedding": "Embedding size E"}
SHARINGS = ("all", "attention", "ffn", "none")
SHARING_NAMES = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN", "none": "not-shared"}
OBJECTIVE_NAMES = {"none": "None", "nsp": "NSP", "sop": "SOP", "random": "random init"}
E_LABELS = {"1/12": "H/12", "1/6": "H/6", "1/3": "H/3", "1": "H"}  # E / H
TASKS = ("topic", "squad")
SQUAD_STRIDE, SQUAD_QUERY_LENGTH = 24, 20  # the SQuAD-style task's features


@dataclasses.dataclass(frozen=True)
class Cell:
    """An architecture (AlbertConfig.sharing, E/H) and objective (sop, nsp, none; random: the control)."""

    sharing: str
    ratio: str
    objective: str = "sop"

    @property
    def id(self):
        return f"{self.sharing}-e{self.ratio.replace('/', 'of')}-{self.objective}"

    def label(self):
        """e.g. "all-shared E=H/6 SOP"."""
        return f"{SHARING_NAMES[self.sharing]} E={E_LABELS[self.ratio]} {OBJECTIVE_NAMES[self.objective]}"


BASE = Cell("all", "1/6", "sop")  # ALBERT-base's own layout, in every table
CONTROL = Cell("all", "1/6", "random")
TABLE_CELLS = {  # each table's cells in the paper's row order
    "sop": [Cell("all", "1/6", o) for o in ("none", "nsp", "sop")],
    "sharing": [Cell(s, r) for r in ("1", "1/6") for s in SHARINGS],
    "embedding": [Cell(s, r) for s in ("none", "all") for r in E_LABELS],
}


def grid_cells(tables):
    """Every cell of `tables` once (a cell in several tables is trained once), then the control."""
    return list(dict.fromkeys(cell for table in tables for cell in TABLE_CELLS[table])) + [CONTROL]


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a grid is trained with, kept in grid.json; each field with help is this tool's flag of its name."""

    tables: list = option(TABLES, f"Which of the paper's tables: {', '.join(TABLES)}.", flag_default=",".join(TABLES))
    seeds: int = option(3, "Seeds per cell (pretraining and fine-tuning; a claim is judged only when each of its "
                           "cells has at least 3).", positive=True)
    hidden_size: int = 96
    num_attention_heads: int = option(4, "Attention heads.", positive=True)
    num_hidden_layers: int = option(4, "Transformer layers.", positive=True)
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    vocab_size: int = 8000
    steps: int = option(400, "Pretraining steps of every cell.", positive=True)
    pretrain_batch_size: int = 64
    pretrain_learning_rate: float = 0.005
    finetune_steps: int = option(150, "Steps of every fine-tuning run.", positive=True)
    finetune_batch_size: int = 32
    finetune_learning_rate: float = 5e-4
    topic_learning_rate: float = 1e-4
    corpus_mb: float = option(0.0, "MB of docstring text to use (0: all found).")
    held_out_percent: int = 10
    topic_per_class: int = 400
    squad_train: int = 600
    squad_dev: int = 150
    dtype_policy: str = "auto"

    def __post_init__(self):
        """ValueError naming the flag of the first bad setting."""
        bad = [t for t in self.tables if t not in TABLES]
        if bad or not self.tables:
            raise ValueError(f"--tables: unknown table(s) {', '.join(bad) or '(none given)'}; expected some of "
                             f"{', '.join(TABLES)}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"the hidden size {self.hidden_size} does not divide into {self.num_attention_heads} "
                             "attention heads; pick another --width or --num_attention_heads.")
        if self.hidden_size % 12:
            raise ValueError(f"the hidden size {self.hidden_size} is not a multiple of 12 (the paper's E/H ratios "
                             "1/12, 1/6, 1/3, 1 give no whole embedding sizes); pick another --width.")

    def embedding_size(self, ratio):
        return self.hidden_size // int(ratio.rpartition("/")[2])  # E/H is 1 or 1/n

    def to_dict(self):
        return dict(dataclasses.asdict(self), tables=list(self.tables))


MIN_SEEDS = 3  # RULE's (docs/reproduction.md quotes RULE word for word)
MARGIN = 2.0  # standard errors
ACCURACIES = ("topic", "mlm_accuracy", "sop_accuracy", "nsp_accuracy")  # shares of N items
RULE = (f"a claim's difference d (a combination sum_i c_i m_i + k of cell means over the seeds) is judged only when "
        f"every cell in it has at least {MIN_SEEDS} seeds (else 'not testable', with the reason). Its standard "
        "error is se = max(sqrt(sum_i c_i^2 s_i^2 / n_i), floor) (s_i: the sample standard deviation of cell i "
        "over its n_i seeds); the floor is the metric's resolution max_i |c_i| r_i, r = 100 / N points for a score "
        "over N dev examples (held-out pairs for a sentence head, masked positions for masked-LM accuracy; for the "
        "average of k tasks, max_t r_t / k), and for one cell's accuracy over N items against a constant p at "
        "least sqrt(p (100 - p) / N). 'A is better than B' (d = A - B): holds when d > 2 se, does not hold when "
        "d < -2 se, else inconclusive. 'A is about B' (within a tolerance t): holds when |d| + 2 se <= t, does not "
        "hold when |d| - 2 se > t, else inconclusive.")


def resolution(results, key):
    """One item's worth of `key`, 100 / N points; for "avg" the largest of its tasks' over their number."""
    if key == "avg":
        return max(resolution(results, task) for task in TASKS) / len(TASKS)
    return 100.0 / results["sizes"][key]


def cell_stats(values):
    """(mean, sample std, n); std is None for fewer than two values."""
    if not values:
        return None, None, 0
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None), len(values)


def judge(terms, constant, kind, tolerance, results, labels=None):
    """{"verdict", "reason", "d", "se", "rule"} of d = sum c_i m_i + constant by RULE; terms: [(c_i, cell (its
    name in the reason, or labels[cell]), key, per-seed values)], kind "better" or "about" (within `tolerance`)."""
    stats = [(c, cell, key, *cell_stats(values)) for c, cell, key, values in terms]
    d = constant + sum(c * mean for c, _, _, mean, _, _ in stats)
    floor = max(abs(c) * resolution(results, key) for c, _, key, *_ in stats)
    if len(stats) == 1 and constant and stats[0][2] in ACCURACIES:  # one accuracy over N items against p
        c, _, key = stats[0][:3]
        p = min(max(-constant / c, 0.0), 100.0)
        floor = max(floor, abs(c) * math.sqrt(p * (100.0 - p) / results["sizes"][key]))
    se = max(math.sqrt(sum(c ** 2 * std ** 2 / n for c, _, _, _, std, n in stats if std is not None)), floor)
    rule = f"d = {d:+.2f}, 2 se = {MARGIN * se:.2f}" + (f", tolerance {tolerance:g}" if kind == "about" else "")
    few = sorted({f"{(labels or {}).get(cell, cell)}: {n}" for _, cell, _, _, _, n in stats if n < MIN_SEEDS})
    if few:
        return {"verdict": "not testable", "reason": f"fewer than {MIN_SEEDS} seeds ({'; '.join(few)})", "d": d,
                "se": se, "rule": rule}
    if kind == "better":
        verdict = "holds" if d > MARGIN * se else "does not hold" if d < -MARGIN * se else "inconclusive"
    else:
        verdict = ("holds" if abs(d) + MARGIN * se <= tolerance else
                   "does not hold" if abs(d) - MARGIN * se > tolerance else "inconclusive")
    return {"verdict": verdict, "reason": "", "d": d, "se": se, "rule": rule}


def seed_values(cell, key):
    """The per-seed values of `key` (a task, "avg" or a held-out accuracy) of a results.json cell."""
    rows = [{**row["downstream"], **row["intrinsic"], "avg": row["avg"]} for row in cell["seeds"].values()]
    return [row[key] for row in rows if key in row]


CHANCE = "chance"  # a claim's constant: minus the chance of its one term's held-out pairs (results["baselines"])
SCORES = TASKS + ("avg",)
METRICS = ("mlm_accuracy", "sop_accuracy", "nsp_accuracy")
SCORE_NAMES = {"topic": "topic cls (acc)", "squad": "SQuAD-style (F1/EM)", "avg": "Avg", "mlm_accuracy": "MLM acc",
               "sop_accuracy": "SOP acc", "nsp_accuracy": "NSP acc"}


# d = sum c_i m_i + constant over `terms` [(c_i, cell, key)], judged "better" (d > 0) or "about" (|d| <= tolerance)
Claim = collections.namedtuple("Claim", "table text terms kind tolerance constant paper",
                               defaults=("better", None, 0.0, None))


def _better(table, text, a, b, key="avg", paper=None):
    return Claim(table, text, [(1, a, key), (-1, b, key)], paper=paper)


def claims():
    """Every claim of the issue's list (shared/ALBERT_REFERENCE.md section 10), as data, the paper's numbers with
    them."""
    sop, nsp, none = (Cell("all", "1/6", o) for o in ("sop", "nsp", "none"))
    h, h6 = ({s: Cell(s, ratio) for s in SHARINGS} for ratio in ("1", "1/6"))
    return [
        Claim("sop", "NSP-trained model solves SOP only at chance (paper 52.0%): SOP acc within 5 points of 50",
              [(1, nsp, "sop_accuracy")], kind="about", tolerance=5.0, constant=-50.0, paper="52.0"),
        Claim("sop", "SOP-trained model solves NSP well (paper 78.9%): NSP acc above chance",
              [(1, sop, "nsp_accuracy")], constant=CHANCE, paper="78.9"),
        Claim("sop", "SOP-trained model solves SOP (paper 86.5%): SOP acc above chance",
              [(1, sop, "sop_accuracy")], constant=CHANCE, paper="86.5"),
        Claim("sop", "SOP's model solves NSP better than NSP's model solves SOP (78.9 vs 52.0)",
              [(1, sop, "nsp_accuracy"), (-1, nsp, "sop_accuracy")], paper="78.9 > 52.0"),
        Claim("sop", "MLM accuracy about the same with SOP and None (within 1 point)",
              [(1, sop, "mlm_accuracy"), (-1, none, "mlm_accuracy")], "about", 1.0),
        Claim("sop", "MLM accuracy about the same with SOP and NSP (within 1 point)",
              [(1, sop, "mlm_accuracy"), (-1, nsp, "mlm_accuracy")], "about", 1.0),
        _better("sop", "SOP gives a better downstream average than NSP", sop, nsp, paper="about one point"),
        _better("sop", "SOP gives a better downstream average than None", sop, none),
        _better("sop", "SOP better than NSP on the multi-sentence task SQuAD-style QA", sop, nsp, "squad",
                paper="SOP's gain is mostly on SQuAD and RACE"),
        _better("sharing", "E=H: not-shared better than shared-attention", h["none"], h["attention"],
                paper="E=768: 82.3 vs 81.6"),
        _better("sharing", "E=H: sharing FFN hurts more than sharing attention (shared-attention better than "
                "shared-FFN)", h["attention"], h["ffn"], paper="E=768: 81.6 vs 79.5"),
        _better("sharing", "E=H/6: not-shared better than shared-attention", h6["none"], h6["attention"],
                paper="E=128: 81.6 vs 81.7"),
        _better("sharing", "E=H/6: sharing FFN hurts more than sharing attention (shared-attention better than "
                "shared-FFN)", h6["attention"], h6["ffn"], paper="E=128: 81.7 vs 80.2"),
        _better("sharing", "E=H: shared-attention better than all-shared", h["attention"], h["all"],
                paper="E=768: 81.6 vs 79.8"),
        Claim("sharing", "E=H: all-shared about shared-FFN (within 1 point)",
              [(1, h["all"], "avg"), (-1, h["ffn"], "avg")], "about", 1.0, paper="E=768: 79.8 vs 79.5"),
        Claim("sharing", "The drop from sharing everything is smaller at E=H/6 than at E=H",
              [(1, h["none"], "avg"), (-1, h["all"], "avg"), (-1, h6["none"], "avg"), (1, h6["all"], "avg")],
              paper="drop 2.5 at E=768, 1.5 at E=128"),
        _better("embedding", "all-shared: E=H/6 better than E=H (a small E is as good or better)", h6["all"],
                h["all"], paper="80.1 vs 79.8"),
        _better("embedding", "all-shared: E=H/6 better than E=H/12", h6["all"], Cell("all", "1/12"),
                paper="80.1 vs 79.0"),
        _better("embedding", "not-shared: a larger E is better (E=H better than E=H/12)", h["none"],
                Cell("none", "1/12"), paper="82.3 vs 81.3"),
        *[_better("premise", f"pretrained beats random init on {SCORE_NAMES[task]}", BASE, CONTROL, task)
          for task in TASKS],
        _better("premise", "pretrained beats random init on the downstream average", BASE, CONTROL),
    ]


def judged_claims(results):
    """The claims whose cells the grid has: {"table", "claim", "paper"} and judge's dict each."""
    verdicts = []
    for claim in claims():
        cells = [results["cells"].get(cell.id) for _, cell, _ in claim.terms]
        if None in cells:
            continue
        constant = -results["baselines"][claim.terms[0][2]] if claim.constant == CHANCE else claim.constant
        terms = [(c, found["label"], key, seed_values(found, key)) for (c, _, key), found in zip(claim.terms, cells)]
        verdict = judge(terms, constant, claim.kind, claim.tolerance, results)
        verdicts.append({"table": claim.table, "claim": claim.text, "paper": claim.paper, **verdict})
    return verdicts


def _fmt(values):
    mean, std, _ = cell_stats(values)
    return "" if mean is None else f"{mean:.2f}" + ("" if std is None else f" ± {std:.2f}")


def _markdown(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def write_report(results, output_dir):
    """Writes table_<table>.csv, claims.csv, report.md and claims.json from results.json; returns their paths."""
    cells, verdicts = results["cells"], judged_claims(results)
    settings = ", ".join(f"{k} {v}" for k, v in results["settings"].items())
    md = ["# The paper's ablations, reproduced small", "", f"Settings (grid.json): {settings}. Scores are dev "
          "percentages, mean ± sample std over seeds; Avg is the mean of the topic and SQuAD-style scores (the "
          "paper's Avg averages SQuAD1.1, SQuAD2.0, MNLI, SST-2 and RACE: compare directions, not values).", ""]
    written = []
    for table in [t for t in TABLES if t in results["tables"]]:  # the paper's order
        keys, rows, lines = (METRICS if table == "sop" else ()) + SCORES, [], []
        for cell_id in results["tables"][table]:
            cell = cells[cell_id]
            rows.append({"cell": cell_id, "sharing": SHARING_NAMES[cell["sharing"]], "E": cell["embedding_size"],
                         "E/H": cell["ratio"], "objective": cell["objective"]})
            for key in METRICS + SCORES:
                rows[-1][f"{key}_mean"], rows[-1][f"{key}_std"], rows[-1]["seeds"] = cell_stats(seed_values(cell, key))
            lines.append([f"{cell['label']} ({cell['embedding_size']})", *[_fmt(seed_values(cell, k)) for k in keys]])
        written.append(atomic.write_csv(os.path.join(output_dir, f"table_{table}.csv"), rows))
        md += [f"## {TITLES[table]}", "", *_markdown(["cell", *[SCORE_NAMES[k] for k in keys]], lines), ""]
    if results["control"] in cells:
        rows = [[name, *[_fmt(seed_values(cells[cell_id], k)) for k in SCORES]] for cell_id, name in
                ((results["base"], "pretrained (SOP)"), (results["control"], "random init"))]
        md += ["## Pretrained against random init (same architecture: all-shared, E=H/6)", "",
               *_markdown(["start", *[SCORE_NAMES[k] for k in SCORES]], rows), ""]
    rows = [[v["table"], v["claim"], v["paper"] or "", v["rule"],
             f"**{v['verdict']}**" + (f": {v['reason']}" if v["reason"] else "")] for v in verdicts]
    md += ["## Claims", "", "Rule: " + RULE, "", *_markdown(["table", "claim", "paper", "ours", "verdict"], rows), ""]
    columns = ("table", "claim", "paper", "d", "se", "verdict", "reason")
    written.append(atomic.write_csv(os.path.join(output_dir, "claims.csv"), verdicts, columns))
    written += [atomic.write_text(os.path.join(output_dir, "report.md"), "\n".join(md)),
                atomic.write_json(os.path.join(output_dir, "claims.json"), verdicts, sort_keys=False)]
    return written


def read_done(path):
    """The record of a finished step ({"result", "seconds"}), or None."""
    return read_json(path, "the record of a finished step") if os.path.isfile(path) else None


def record_done(path, result, seconds):
    atomic.write_json(path, {"result": result, "seconds": round(seconds, 2)})


def call_command(module, args, log_path):
    """`python -m albert_tf.<command> ARGS` in this process, printing to `log_path`; returns its run()'s result."""
    import keras

    name = module.__name__.rsplit(".", 1)[-1]
    values = flags.FlagValues()
    module.define_flags(values)
    cli.parse_flags(name, [name, *args], values)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        print(f"$ python -m albert_tf.{name} " + " ".join(args), flush=True)
        try:
            return module.run(values)
        finally:
            keras.backend.clear_session()  # collects garbage itself (free_memory=True)


class Grid:
    """A grid's steps, each through a project command (in this process) or a task tool, in its directory (data/,
    cells/<cell>/seed<k>/: docs/reproduction.md); a finished step's record is steps/<step>.json there."""

    def __init__(self, settings, root):
        self.settings, self.root = settings, root
        self.spm_model = self.data("spm.model")

    def data(self, *parts):
        return os.path.join(self.root, "data", *parts)

    def run_dir(self, cell, seed, *parts):
        return os.path.join(self.root, "cells", cell.id, f"seed{seed}", *parts)

    def steps(self):
        """Every step in order: (label, its record, what runs it)."""
        data = [("corpus", self.corpus)]
        data += [(f"{split}_{o}", functools.partial(self.pretraining_data, split, o))
                 for split in ("train", "eval") for o in ("sop", "nsp")]
        data.append(("tasks", self.tasks))
        todo = [(f"data: {name}", self.data("steps", f"{name}.json"), run) for name, run in data]
        for seed in range(1, self.settings.seeds + 1):
            for cell in grid_cells(self.settings.tables):
                todo += [(f"{name} {cell.id} seed {seed}", self.run_dir(cell, seed, "steps", f"{name}.json"), run)
                         for name, run in self.cell_steps(cell, seed)]
        return todo

    def cell_steps(self, cell, seed):
        steps = [("pretrain", functools.partial(self.pretrain, cell, seed))] if cell.objective != "random" else []
        return steps + [(task, functools.partial(self.finetune, cell, seed, task)) for task in TASKS]

    def corpus(self):
        """The sample corpus split by a hash of the source file (pretrain.txt, held_out.txt and held_out.jsonl),
        and the release's SentencePiece recipe on pretrain.txt."""
        from albert_tf.data import sample_corpus
        from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

        s, parts, held_entries, total = self.settings, {"pretrain": [], "held_out": []}, [], 0
        for entry in sample_corpus.iter_entries():
            block = "\n".join(entry["sentences"]) + "\n\n"
            total += len(block.encode("utf-8"))
            held = zlib.crc32(entry["source"].encode("utf-8")) % 100 < s.held_out_percent
            parts["held_out" if held else "pretrain"].append(block)
            held_entries += [entry] if held else []
            if s.corpus_mb and total >= int(s.corpus_mb * 1_000_000):
                break
        for name, blocks in parts.items():
            atomic.write_text(self.data("corpus", f"{name}.txt"), "".join(blocks))
        sample_corpus.write_entries(self.data("corpus", "held_out.jsonl"), held_entries)
        options = SentencePieceOptions(vocab_size=s.vocab_size, num_threads=os.cpu_count() or 1)
        train_sentencepiece([self.data("corpus", "pretrain.txt")], self.spm_model[:-len(".model")], options)
        return {f"{name}_documents": len(blocks) for name, blocks in parts.items()}

    def pretraining_data(self, split, objective):
        """create_pretraining_data on pretrain.txt (train) or held_out.txt (eval): SOP or NSP pairs, their
        number, chance (the larger label's share, percent) and masked positions (its data summary)."""
        from albert_tf import create_pretraining_data
        from albert_tf.data.summary import summary_path_for

        s, output = self.settings, self.data(f"{split}_{objective}.tfrecord")
        call_command(create_pretraining_data, [
            f"--input_file={self.data('corpus', 'pretrain.txt' if split == 'train' else 'held_out.txt')}",
            f"--output_file={output}", f"--spm_model_file={self.spm_model}", f"--max_seq_length={s.max_seq_length}",
            f"--max_predictions_per_seq={s.max_predictions_per_seq}", f"--dupe_factor={3 if split == 'train' else 1}",
            f"--random_next_sentence={objective == 'nsp'}", "--num_workers=1",
            f"--random_seed={12345 + (split == 'eval')}"], self.data("log.txt"))
        summary = read_json(summary_path_for(output), "create_pretraining_data's summary")
        share = summary["sentence_order_label_1_share"]
        return {"records": output, "pairs": summary["instances"], "chance": 100.0 * max(share, 1.0 - share),
                "mlm_positions": summary["masked_lm_predictions"]}

    def tasks(self):
        """The topic (without tf_keras) and SQuAD-style tasks from the held-out entries by the task tools."""
        from albert_tf.data import sample_corpus
        from albert_tf.data.tokenization import SentencePieceTokenizer
        from albert_tf.tasks.squad.cache import load_or_build_features
        from albert_tf.tasks.squad.features import FeatureSettings

        corpus, squad = self.data("corpus", "held_out.jsonl"), self.data("tasks", "squad")
        entries, s = sample_corpus.read_entries(corpus), self.settings
        topical = [e for e in entries if make_topic_task.package_of(e["source"]) != "tf_keras"]
        train, dev, labels = make_topic_task.make_corpus_task(topical, num_classes=4, per_class=s.topic_per_class,
                                                              source=corpus)
        make_topic_task.write_task(self.data("tasks", "topic"), train, dev)
        functions = make_squad_data.corpus_docstring_entries(entries)
        for split in ("train", "dev"):
            dataset = make_squad_data.make_dataset("1.1", getattr(s, f"squad_{split}"), 12345, 600, split, functions)
            atomic.write_json(os.path.join(squad, f"{split}.json"), dataset, indent=None, sort_keys=False)
        features = load_or_build_features(  # built once, so that every run takes exactly --finetune_steps steps
            os.path.join(squad, "train.json"), os.path.join(squad, "train_features.tfrecord"),
            SentencePieceTokenizer(self.spm_model, do_lower_case=True),
            FeatureSettings(self.settings.max_seq_length, SQUAD_STRIDE, SQUAD_QUERY_LENGTH, True, "v1"))
        return {"topic_labels": list(labels), "topic_dev": len(dev), "squad_dev": s.squad_dev,
                "squad_train_features": features.num_features}

    def _model_args(self, cell, seed):
        from albert_tf.modeling.config import AlbertConfig

        s, config = self.settings, os.path.join(self.root, "cells", cell.id, "albert_config.json")
        if not os.path.isfile(config):  # no dropout, as the release's v2 configs
            AlbertConfig(vocab_size=s.vocab_size, embedding_size=s.embedding_size(cell.ratio),
                         hidden_size=s.hidden_size, num_hidden_layers=s.num_hidden_layers,
                         num_attention_heads=s.num_attention_heads, intermediate_size=4 * s.hidden_size,
                         max_position_embeddings=s.max_seq_length, sharing=cell.sharing).to_json_file(config)
        return [f"--albert_config_file={config}", f"--max_seq_length={s.max_seq_length}", f"--random_seed={seed}",
                f"--dtype_policy={s.dtype_policy}"]

    def pretrain(self, cell, seed):
        """run_pretraining of one cell, then its held-out accuracies on SOP and NSP pairs (percent)."""
        from albert_tf import run_pretraining

        s, log, steps = self.settings, self.run_dir(cell, seed, "log.txt"), self.settings.steps
        args = [*self._model_args(cell, seed), f"--max_predictions_per_seq={s.max_predictions_per_seq}"]
        data = self.data("train_nsp.tfrecord" if cell.objective == "nsp" else "train_sop.tfrecord")
        call_command(run_pretraining, [
            *args, f"--input_file={data}",
            f"--output_dir={self.run_dir(cell, seed, 'pretrain')}", f"--train_batch_size={s.pretrain_batch_size}",
            f"--learning_rate={s.pretrain_learning_rate}", f"--num_train_steps={steps}",
            f"--num_warmup_steps={steps // 10}", f"--save_checkpoints_steps={steps}", "--keep_checkpoint_max=1",
            f"--iterations_per_loop={max(1, min(100, steps // 10))}", "--do_train", "--nodo_eval",
            "--dynamic_masking", f"--sentence_loss={cell.objective != 'none'}", "--optimizer=lamb"], log)
        accuracies = {}
        for held_out in ("nsp", "sop"):  # every held-out pair in one batch; the masked-LM accuracy is eval_sop's
            pairs = read_done(self.data("steps", f"eval_{held_out}.json"))["result"]["pairs"]
            found = call_command(run_pretraining, [
                *args, f"--init_checkpoint={self.run_dir(cell, seed, 'pretrain')}", "--nodo_train", "--do_eval",
                f"--eval_input_file={self.data(f'eval_{held_out}.tfrecord')}", f"--eval_batch_size={pairs}",
                f"--output_dir={self.run_dir(cell, seed, 'eval_' + held_out)}", "--max_eval_steps=1"], log)["eval"]
            accuracies.update({"mlm_accuracy": 100 * found["masked_lm_accuracy"],
                               f"{held_out}_accuracy": 100 * found["sentence_order_accuracy"]})
        return accuracies

    def finetune(self, cell, seed, task):
        """One task from the cell's pretrained model (the control: random weights): {"score"} in percent."""
        from albert_tf import run_classifier, run_squad_v1

        s, log, tasks = self.settings, self.run_dir(cell, seed, "log.txt"), read_done(self.data("steps", "tasks.json"))
        steps, batch, where = s.finetune_steps, s.finetune_batch_size, self.data("tasks", task)
        every = steps // 3 if steps >= 30 else steps  # three dev evaluations; a --quick run's once, at its end
        args = [*self._model_args(cell, seed), f"--spm_model_file={self.spm_model}",
                f"--output_dir={self.run_dir(cell, seed, task)}", f"--train_batch_size={batch}",
                f"--learning_rate={s.topic_learning_rate if task == 'topic' else s.finetune_learning_rate}",
                "--do_train", f"--save_checkpoints_steps={every}", f"--iterations_per_loop={every}",
                "--keep_checkpoint_max=1"]
        args += [f"--init_checkpoint={self.run_dir(cell, seed, 'pretrain')}"] if cell.objective != "random" else []
        if task == "topic":
            found = call_command(run_classifier, [
                *args, "--do_eval", f"--train_step={steps}", f"--warmup_step={steps // 10}", "--eval_batch_size=64",
                "--task_name=tsv", f"--data_dir={where}", "--text_a_column=sentence",
                f"--labels={','.join(tasks['result']['topic_labels'])}"], log)["eval"]
            return {"score": 100 * found["accuracy"]}
        epochs = (steps + 0.5) * batch / tasks["result"]["squad_train_features"]  # int(features / batch x epochs)
        found = call_command(run_squad_v1, [
            *args, f"--train_file={where}/train.json", f"--predict_file={where}/dev.json",
            f"--train_feature_file={where}/train_features.tfrecord", "--do_predict", "--best_checkpoint",
            f"--predict_feature_file={where}/dev_features.tfrecord", f"--num_train_epochs={epochs!r}",
            f"--doc_stride={SQUAD_STRIDE}", f"--max_query_length={SQUAD_QUERY_LENGTH}", "--predict_batch_size=64"], log)
        f1, exact_match = found["metrics"]["f1"], found["metrics"]["exact_match"]
        return {"score": (f1 + exact_match) / 2, "f1": f1, "exact_match": exact_match}

    def gather(self):
        """results.json (its layout: docs/reproduction.md)."""
        s, cells = self.settings, {}
        records = [self.data("steps", f"{name}.json") for name in ("eval_sop", "eval_nsp", "tasks")]
        sop, nsp, tasks = (read_done(path)["result"] for path in records)
        for cell in grid_cells(s.tables):
            seeds = {}
            for seed in range(1, s.seeds + 1):
                done = {name: read_done(self.run_dir(cell, seed, "steps", f"{name}.json"))["result"]
                        for name, _ in self.cell_steps(cell, seed)}
                downstream = {task: done[task]["score"] for task in TASKS}
                seeds[str(seed)] = {"intrinsic": done.get("pretrain", {}), "downstream": downstream,
                                    "avg": statistics.mean(downstream.values())}
            cells[cell.id] = {"sharing": cell.sharing, "ratio": cell.ratio, "objective": cell.objective,
                              "embedding_size": s.embedding_size(cell.ratio), "label": cell.label(), "seeds": seeds}
        return {"settings": s.to_dict(), "cells": cells, "control": CONTROL.id, "base": BASE.id,
                "tables": {t: [c.id for c in TABLE_CELLS[t]] for t in s.tables},
                # what the floors divide by: dev examples, held-out pairs, masked positions
                "sizes": {"topic": tasks["topic_dev"], "squad": tasks["squad_dev"], "sop_accuracy": sop["pairs"],
                          "nsp_accuracy": nsp["pairs"], "mlm_accuracy": sop["mlm_positions"]},
                "baselines": {"sop_accuracy": sop["chance"], "nsp_accuracy": nsp["chance"]}}


QUICK = {"tables": ("sop",), "seeds": 1, "hidden_size": 24, "num_attention_heads": 2, "num_hidden_layers": 2,
         "max_seq_length": 48, "max_predictions_per_seq": 6, "vocab_size": 1000, "steps": 20,
         "pretrain_batch_size": 16, "finetune_steps": 6, "finetune_batch_size": 8, "corpus_mb": 1.5,
         "held_out_percent": 30, "topic_per_class": 40, "squad_train": 60, "squad_dev": 20}


@dataclasses.dataclass(kw_only=True)
class ReproduceOptions:
    """reproduce's flags beside the Settings fields' (RECORD adds --output_dir and --dtype_policy)."""

    width: float = option(1.0, f"Width multiplier: hidden size {Settings.hidden_size} x width (a multiple of 12 and "
                               "of the heads), embedding sizes at the paper's E/H ratios.")
    quick: bool = option(False, "Tiny models, one seed, the sentence-level table unless --tables says otherwise: "
                                "the pipeline at test size (its numbers mean nothing; one seed: no verdicts).")


# --output_dir: where the grid lives (a new directory, or this tool's own: resumed)
RECORD = Command("reproduce", ((RunDirectory, None), (Settings, None), (ReproduceOptions, None),
                              (PrecisionOptions, None)))


def define_flags(flag_values=None):
    option_flags.define_command(flags.FLAGS if flag_values is None else flag_values, RECORD)


def settings_from_flags(f):
    """The grid's Settings from their flags; --quick: QUICK's, with the flags given (not --width)."""
    hidden = Settings.hidden_size * f.width
    if f.width <= 0 or abs(hidden - round(hidden)) > 1e-9:
        raise ValueError(f"--width={f.width} gives a hidden size of {hidden:g}, not a whole number.")
    values = dict(QUICK) if f.quick else {"hidden_size": int(round(hidden))}
    for field in dataclasses.fields(Settings):  # those with a flag
        if field.name in f and (f[field.name].present or not f.quick):
            values[field.name] = f[field.name].value
    return Settings(**dict(values, tables=tuple(t.strip() for t in values["tables"] if t.strip())))


def run(f):
    """Runs or resumes the grid in --output_dir (a finished one: no step), then writes results.json and the report."""
    from albert_tf.training.precision import choose

    if not f.output_dir:
        raise ValueError("--output_dir is required.")
    outputs.check([outputs.Output("--output_dir", f.output_dir, outputs.REPRODUCTION)])
    option_flags.values(f, RECORD)  # every check before any step: the positive flags, then the settings
    settings = dataclasses.replace(settings_from_flags(f), dtype_policy=choose(f.dtype_policy).policy)
    grid_json, wanted = os.path.join(f.output_dir, "grid.json"), settings.to_dict()
    existing = read_json(grid_json, "the grid's settings") if os.path.isfile(grid_json) else wanted
    changed = ", ".join(f"{k}: {existing.get(k)!r} there, {wanted.get(k)!r} asked"
                        for k in sorted(set(existing) | set(wanted)) if existing.get(k) != wanted.get(k))
    if changed:  # the policy as this machine resolves --dtype_policy: cells of two policies never mix
        raise ValueError(f"--output_dir={f.output_dir} holds another grid ({changed}); resume it with its own "
                         f"settings ({grid_json}) or choose a new --output_dir.")
    outputs.claim_dir(f.output_dir, outputs.REPRODUCTION, "--output_dir")
    atomic.write_json(grid_json, wanted)
    grid = Grid(settings, f.output_dir)
    steps = grid.steps()
    todo = [step for step in steps if not read_done(step[1])]  # a step is done when its record exists
    print(f"reproduce: {len(steps)} steps, {len(steps) - len(todo)} already done ({len(grid_cells(settings.tables))} "
          f"cells x {settings.seeds} seeds; the settings: {grid_json})", flush=True)
    import keras  # noqa: F401 (with TensorFlow: what every step imports)

    gc.freeze()  # those imports live as long as the process: the collection after each step skips them
    start = time.perf_counter()
    for index, (label, record, function) in enumerate(todo, 1):  # each recorded when it finishes, with a progress line
        began = time.perf_counter()
        result = function()
        seconds = time.perf_counter() - began
        record_done(record, result, seconds)
        elapsed = time.perf_counter() - start
        print(f"[{index}/{len(todo)}] {label} ({seconds:.0f}s); {index} steps in {elapsed / 60:.1f} min, "
              f"{index / elapsed * 60:.1f}/min, ETA {elapsed / index * (len(todo) - index) / 60:.1f} min", flush=True)
    results = atomic.write_json(os.path.join(f.output_dir, "results.json"), grid.gather())
    written = write_report(read_json(results, "the grid's results"), f.output_dir)
    print(f"reproduce: wrote {', '.join(os.path.relpath(p, f.output_dir) for p in written)} in {f.output_dir} "
          "from its results.json", flush=True)
    return 0


main, entry = entry_points.command("reproduce", define_flags, run)


if __name__ == "__main__":
    entry()
