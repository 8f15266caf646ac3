"""SQuAD v1.1 speed: feature conversion and the fine-tuning train step, against matmul peak.

    python benchmarks/squad_bench.py [--runs=3] [--steps=4] [--batch_size=8] [--num_questions=2000] \\
        [--vocab_size=18000] [--output_dir=results/squad_bench]
    python benchmarks/squad_bench.py --tiny      # a smoke test: small config, seq 128, seconds

Data: SQuAD v1.1-format questions made by tools/make_squad_data.py's make_dataset (real
Python standard-library docstrings; nothing downloaded) with --max_context_chars; a
SentencePiece model (--vocab_size pieces: 18000, the most the sample corpus allows, where
albert_base has 30000) trained at start on the
sample corpus (albert_tf.data.sample_corpus, --corpus_mb) and kept in --output_dir/spm for
later runs with the same settings.

(a) Feature conversion: albert_tf.tasks.squad.features.convert_examples_to_features (training
    features: context tokenization with character offsets, answer alignment, windows) at
    max_seq_length 384, doc_stride 128, max_query_length 64 over the read examples;
    reported as questions/s and features/s. The generator's contexts are short (at most
    --max_context_chars characters), so most questions give one window: features per
    question is reported beside the rates (SQuAD v1.1 itself gives more for long contexts).
(b) Training: the SQuAD v1 task (albert_tf.tasks.squad.task.SquadTask: the v1 start/end head and
    loss) trained by the driver's Trainer (AdamW, global-norm clipping; graph mode, or XLA
    with --jit_compile) on those features at max_seq_length 384, the albert_base config
    (configs/albert_base.json with vocab_size set to the SentencePiece model's), batch
    --batch_size; 2 warm-up steps (trace) then --steps timed steps per run.

Each of --runs runs times (a) then (b) (interleaved, so a drift in the machine's speed hits
both); the median of the runs is reported. GFLOP/s of (b): training FLOPs per example
counted analytically as train_step_bench.py does (2 FLOPs per multiply-add, x3 for forward +
backward; encoder at the full max_seq_length, since padding is computed too, plus the
start/end head) times examples/s; the peak is the best fp32 matmul GFLOP/s (n = 2048,
graph mode) measured in the same run. Writes results.json and results.csv in --output_dir,
with the CPU model from /proc/cpuinfo.
"""

import csv
import importlib.util
import json
import os
import statistics
import time

from train_step_bench import matmul_peak_gflops  # the same peak measurement (benchmarks/ is on sys.path)

from albert_tf import entry_points, option_flags

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FULL = {"max_seq_length": 384, "doc_stride": 128, "max_query_length": 64}
TINY = {"max_seq_length": 128, "doc_stride": 48, "max_query_length": 64}
TINY_CONFIG = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
               "embedding_size": 32, "max_position_embeddings": 128}
WARMUP_STEPS = 2


def define_flags(flag_values):
    from absl import flags

    flags.DEFINE_integer("runs", 3, "Runs (each times conversion, then training); the median is reported.",
                         flag_values=flag_values)
    flags.DEFINE_integer("steps", 4, "Timed training steps per run.", flag_values=flag_values)
    flags.DEFINE_integer("batch_size", 8, "Training batch size.", flag_values=flag_values)
    flags.DEFINE_integer("num_questions", 2000, "SQuAD v1.1 questions made by make_dataset.", flag_values=flag_values)
    flags.DEFINE_integer("max_context_chars", 600, "make_dataset's longest context in characters (>= 200).",
                         flag_values=flag_values)
    define_sentencepiece_flags(flag_values)
    flags.DEFINE_bool("jit_compile", False, "Compile forward + backward with XLA.", flag_values=flag_values)
    option_flags.define_precision(flag_values)
    flags.DEFINE_string("output_dir", "results/squad_bench", "Where results (and the SentencePiece model) go.",
                        flag_values=flag_values)
    flags.DEFINE_bool("tiny", False, "Smoke test: a 2-layer hidden-64 config, seq 128 (doc_stride 48); pass small "
                      "--num_questions / --vocab_size / --corpus_mb too.", flag_values=flag_values)


def cpu_model():
    from albert_tf.training.precision import read_cpuinfo

    return read_cpuinfo()[0]


def squad_training_flops_per_example(config, seq):
    """Analytic training FLOPs of one SQuAD v1 example (forward + backward = 3x forward):
    the encoder over all `seq` positions (train_step_bench.py's count) plus the start/end
    head (H x 2 per position); the embedding lookup is not counted."""
    H, I, E, L = config.hidden_size, config.intermediate_size, config.embedding_size, config.num_hidden_layers
    per_token = L * (4 * H * H + 2 * H * I + 2 * seq * H)
    if E != H:
        per_token += E * H
    per_token += 2 * H  # start/end logits
    return 2 * 3 * seq * per_token


def _make_squad_data_module():
    spec = importlib.util.spec_from_file_location("make_squad_data", os.path.join(ROOT, "tools", "make_squad_data.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The most pieces SentencePiece can make of the 10.4 MB built-in sample corpus is 18,075;
# albert_base's 30000 would only add embedding rows (a gather, not matmul work).
SAMPLE_VOCAB_SIZE = 18000


def define_sentencepiece_flags(flag_values):
    """--vocab_size and --corpus_mb: the benchmark's SentencePiece model (sentencepiece_model)."""
    from absl import flags

    flags.DEFINE_integer("vocab_size", SAMPLE_VOCAB_SIZE, "SentencePiece pieces (albert_base has 30000; the "
                         "sample corpus allows at most 18,075).", flag_values=flag_values)
    flags.DEFINE_float("corpus_mb", 10.4, "Sample corpus size the SentencePiece model is trained on.",
                       flag_values=flag_values)


def sentencepiece_model(out_dir, vocab_size, corpus_mb):
    """Trains (or reuses, when made with the same settings) out_dir/spm/spm.model."""
    from albert_tf.data.sample_corpus import source_for, write_corpus
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
    from albert_tf.storage import atomic

    spm_dir = os.path.join(out_dir, "spm")
    model, sidecar = os.path.join(spm_dir, "spm.model"), os.path.join(spm_dir, "settings.json")
    settings = {"vocab_size": vocab_size, "corpus_mb": corpus_mb}
    if os.path.isfile(model) and os.path.isfile(sidecar):
        with open(sidecar) as f:
            if json.load(f) == settings:
                return model, 0.0
    os.makedirs(spm_dir, exist_ok=True)
    start = time.perf_counter()
    corpus = os.path.join(spm_dir, "corpus.txt")
    write_corpus(corpus, corpus_mb, source_for(corpus_mb))
    model = train_sentencepiece([corpus], os.path.join(spm_dir, "spm"),
                                SentencePieceOptions(vocab_size=vocab_size, num_threads=2))
    atomic.write_json(sidecar, settings)
    return model, time.perf_counter() - start


def run(f):
    if f.runs < 1 or f.steps < 1 or f.batch_size < 1 or f.num_questions < 1:
        raise ValueError("--runs, --steps, --batch_size and --num_questions must be positive.")
    from albert_tf.tasks.squad.features import convert_examples_to_features, features_to_arrays
    from albert_tf.tasks.squad.reading import read_squad_examples
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.storage import atomic
    from albert_tf.tasks.squad.task import SquadOptions, SquadTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    shape = TINY if f.tiny else FULL
    seq = shape["max_seq_length"]
    out = f.output_dir if os.path.isabs(f.output_dir) else os.path.join(ROOT, f.output_dir)
    os.makedirs(out, exist_ok=True)

    # --- inputs: SentencePiece model, SQuAD-format data, config ---------------------------
    spm_model, spm_seconds = sentencepiece_model(out, f.vocab_size, f.corpus_mb)
    tokenizer = SentencePieceTokenizer(spm_model)
    print(f"SentencePiece model {spm_model}: {tokenizer.vocab_size} pieces"
          + (f" (trained in {spm_seconds:.1f}s)" if spm_seconds else " (reused)"), flush=True)
    dataset = _make_squad_data_module().make_dataset("1.1", f.num_questions, 12345, f.max_context_chars)
    train_file = os.path.join(out, "train-v1.1.json")
    atomic.write_json(train_file, dataset, indent=None, sort_keys=False)
    examples = read_squad_examples(train_file, is_training=True, version="v1")
    context_chars = [len(p["context"]) for a in dataset["data"] for p in a["paragraphs"]]
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "albert_base.json"))
    config = config.replace(vocab_size=tokenizer.vocab_size, **(TINY_CONFIG if f.tiny else {}))
    config_file = os.path.join(out, "albert_config.json")
    config.to_json_file(config_file)
    flops = squad_training_flops_per_example(config, seq)
    peak = matmul_peak_gflops()
    cpu = cpu_model()
    print(f"CPU: {cpu}; fp32 matmul peak (n=2048, graph, best of 5): {peak:.1f} GFLOP/s", flush=True)
    print(f"{len(examples)} questions, {len(context_chars)} contexts (median {statistics.median(context_chars):.0f} "
          f"chars); {'tiny' if f.tiny else 'albert_base'} config, seq {seq}, doc_stride {shape['doc_stride']}, "
          f"query {shape['max_query_length']}; training cost {flops / 1e9:.2f} GFLOP per example", flush=True)

    def convert():
        start = time.perf_counter()
        features = convert_examples_to_features(examples, tokenizer, is_training=True, **shape)
        return features, time.perf_counter() - start

    # --- the training step: SquadTask through the driver's Trainer ------------------------
    features, _ = convert()  # also the training data
    if not features:
        raise ValueError("no training features were made.")
    options = SquadOptions(version="v1", output_dir=out, albert_config_file=config_file, spm_model_file=spm_model,
                           do_train=True, **shape)
    task = SquadTask(options, features_to_arrays(features))
    trainer = Trainer(task, TrainingOptions(output_dir=out, train_batch_size=f.batch_size, optimizer="adamw",
                                            learning_rate=5e-5, num_train_steps=100_000, jit_compile=f.jit_compile,
                                            write_curves=False, dtype_policy=f.dtype_policy))
    iterator = iter(task.train_dataset(None, f.batch_size, 0))
    start = time.perf_counter()
    trainer.train(iterator, WARMUP_STEPS)  # trace and warm up
    print(f"warm-up ({WARMUP_STEPS} steps, tracing included): {time.perf_counter() - start:.1f}s", flush=True)

    conversions, rates = [], []
    for r in range(f.runs):  # interleaved: a drift in machine speed hits both measurements
        feats, seconds = convert()
        conversions.append((len(examples) / seconds, len(feats) / seconds))
        start = time.perf_counter()
        terms = trainer.train(iterator, f.steps)
        rates.append(f.steps * f.batch_size / (time.perf_counter() - start))
        loss = terms["loss_sum"] / max(terms["count"], 1.0)
        print(f"run {r + 1}/{f.runs}: conversion {conversions[-1][0]:,.0f} questions/s "
              f"({conversions[-1][1]:,.0f} features/s); training {rates[-1]:.3f} examples/s (loss {loss:.3f})",
              flush=True)

    questions_s = statistics.median(c[0] for c in conversions)
    features_s = statistics.median(c[1] for c in conversions)
    examples_s = statistics.median(rates)
    gflops = examples_s * flops / 1e9
    summary = features.summary.to_dict() if hasattr(features.summary, "to_dict") else {}
    common = {"cpu_model": cpu, "matmul_peak_gflops": round(peak, 1), "tiny": bool(f.tiny), "runs": f.runs,
              "max_seq_length": seq, "doc_stride": shape["doc_stride"], "max_query_length": shape["max_query_length"],
              "vocab_size": tokenizer.vocab_size}
    rows = [
        dict(common, measurement="feature_conversion", questions=len(examples), features=len(features),
             features_per_question=round(len(features) / len(examples), 3),
             median_questions_per_second=round(questions_s, 1), median_features_per_second=round(features_s, 1),
             runs_questions_per_second=[round(c[0], 1) for c in conversions]),
        dict(common, measurement="train_step_squad_v1", batch_size=f.batch_size, steps=f.steps,
             jit_compile=bool(f.jit_compile), dtype_policy=trainer.precision.policy,
             config="tiny" if f.tiny else "albert_base",
             median_examples_per_second=round(examples_s, 3), runs_examples_per_second=[round(x, 3) for x in rates],
             training_flops_per_example=flops, gflops_per_second=round(gflops, 1),
             fraction_of_matmul_peak=round(gflops / peak, 3)),
    ]
    print(f"feature conversion: {questions_s:,.0f} questions/s, {features_s:,.0f} features/s "
          f"({len(features) / len(examples):.2f} features per question; runs "
          f"{', '.join(f'{c[0]:,.0f}' for c in conversions)} questions/s)")
    print(f"SQuAD v1 train step: {examples_s:.3f} examples/s (batch {f.batch_size}, seq {seq}; runs "
          f"{', '.join(f'{x:.3f}' for x in rates)}) = {gflops:.1f} GFLOP/s = {gflops / peak:.1%} of matmul peak")
    atomic.write_json(os.path.join(out, "results.json"),
                      {"cpu_model": cpu, "matmul_peak_gflops": peak, "training_flops_per_example": flops,
                       "num_questions": len(examples), "max_context_chars": f.max_context_chars,
                       "median_context_chars": statistics.median(context_chars), "conversion_summary": summary,
                       "rows": rows})
    fields = []
    for row in rows:
        fields.extend(k for k in row if k not in fields and not k.startswith("runs_"))
    with atomic.open_file(os.path.join(out, "results.csv"), "w") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}/results.json and results.csv")
    return 0


main, entry = entry_points.command("squad_bench", define_flags, run)


if __name__ == "__main__":
    entry()
