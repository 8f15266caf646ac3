"""Parameter counts of the paper's Table 1 and Table 5, beside the models this package builds.

    python -m albert_tf.param_table [--output_dir=results]

Prints both tables and writes `param_table.csv` in --output_dir (new, or replacing the one
it wrote before; a file it did not make is refused before anything is built:
albert_tf.storage.outputs). Counts come from the
real `AlbertEncoder` built without allocating weights (`count_parameters`), so xxlarge
and bert_xlarge need no weight memory. "reference" is the exact count in
shared/ALBERT_REFERENCE.md (encoder + pooler, V = 30000); "paper" the rounded figure
the paper prints.
"""

import sys

from albert_tf import entry_points, option_flags
from albert_tf.storage.options import Command, RunDirectory
from albert_tf.storage import files

# (preset, reference exact count, paper's figure)
TABLE_1 = (
    ("albert_base", 11_683_584, "12M"),
    ("albert_large", 17_683_968, "18M"),
    ("albert_xlarge", 58_724_864, "60M"),
    ("albert_xxlarge", 222_595_584, "235M"),
    ("bert_base", 109_081_344, "108M"),
    ("bert_large", 334_607_360, "334M"),
    ("bert_xlarge", 1_275_291_648, "1270M"),
)

# ALBERT-base with E in {768, 128} and the four sharing strategies:
# (embedding_size, sharing, reference exact count, paper's figure)
TABLE_5 = (
    (768, "all", 31_114_752, "31M"),
    (768, "attention", 83_078_400, "83M"),
    (768, "ffn", 57_117_696, "57M"),
    (768, "none", 109_081_344, "108M"),
    (128, "all", 11_683_584, "12M"),
    (128, "attention", 63_647_232, "64M"),
    (128, "ffn", 37_686_528, "38M"),
    (128, "none", 89_650_176, "89M"),
)

COLUMNS = (
    "table", "model", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "embedding_size", "sharing", "reference", "paper", "built", "match",
)


def _row(table, model, config, reference, paper):
    from albert_tf.modeling import count_parameters

    built = count_parameters(config)
    values = {"table": table, "model": model, "reference": reference, "paper": paper, "built": built,
              "match": built == reference}
    return {column: values[column] if column in values else getattr(config, column) for column in COLUMNS}


def build_rows():
    """Builds every model of both tables; returns one dict per row (keys `COLUMNS`)."""
    from albert_tf.modeling import AlbertConfig  # Keras (and TensorFlow) once the command runs

    rows = [_row("1", name, AlbertConfig.from_preset(name), ref, paper) for name, ref, paper in TABLE_1]
    base = AlbertConfig.from_preset("albert_base")
    for embedding_size, sharing, ref, paper in TABLE_5:
        config = base.replace(embedding_size=embedding_size, sharing=sharing)
        rows.append(_row("5", f"albert_base E={embedding_size} {sharing}", config, ref, paper))
    return rows


def format_rows(rows):
    header = (f"{'model':<28} {'H':>5} {'L':>3} {'E':>5} {'sharing':<10} {'paper':>6} {'reference':>14} "
              f"{'built':>14}  ok")
    lines = []
    for table in ("1", "5"):
        title = "Table 1: model sizes" if table == "1" else "Table 5: cross-layer sharing (ALBERT-base)"
        lines += ["", title, header, "-" * len(header)]
        for r in rows:
            if r["table"] != table:
                continue
            lines.append(
                f"{r['model']:<28} {r['hidden_size']:>5} {r['num_hidden_layers']:>3} "
                f"{r['embedding_size']:>5} {r['sharing']:<10} {r['paper']:>6} "
                f"{r['reference']:>14,} {r['built']:>14,}  {'yes' if r['match'] else 'NO'}"
            )
    return "\n".join(lines)


RECORD = Command("param_table", ((RunDirectory, None),), defaults={"output_dir": "results"})


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


def run(f):
    return write_table(f.output_dir)


def write_table(output_dir, stream=None):
    """Prints both tables, writes output_dir/param_table.csv; returns 0, or 1 when a
    built count differs from the reference."""
    if files.exists(output_dir) and not files.isdir(output_dir):
        raise NotADirectoryError(f"--output_dir={output_dir} exists and is not a directory.")
    from albert_tf.storage import atomic, outputs

    path = files.join(output_dir, "param_table.csv")
    outputs.check([outputs.Output("--output_dir", path, outputs.GENERATED_DATA)])  # before any work
    rows = build_rows()
    print(format_rows(rows), file=stream)
    with outputs.replacing_file(path, outputs.GENERATED_DATA, "--output_dir"):
        path = atomic.write_csv(path, rows, COLUMNS)
    print(f"\nwrote {path}", file=stream)
    if not all(r["match"] for r in rows):
        print("param_table: some built counts differ from the reference", file=sys.stderr)
        return 1
    return 0


main, entry = entry_points.command("param_table", define_flags, run)


if __name__ == "__main__":
    entry()
