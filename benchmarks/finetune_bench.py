"""Fine-tuning, evaluation and serving speed on a real-text task: albert_tf against
keras-hub and Hugging Face transformers, with and without length bucketing.

    python benchmarks/finetune_bench.py [--repeats=3] [--steps=8] [--calls=100] [--throughput_batches=4] \\
        [--systems=albert_tf,keras_hub,hf] [--hf_python=benchmarks/.peers-venv/bin/python] \\
        [--output_dir=results/finetune_bench]
    python benchmarks/finetune_bench.py --tiny   # smoke test: 2-layer hidden-64 config, 1-2 minutes
    bash benchmarks/make_peers_venv.sh           # once, for the transformers peer (--systems without hf skips it)

Task: the repo's docstring topic task (notebooks/data/docstring_topics/{train,dev}.tsv:
real one-sentence docstrings, 4 labels), sentences as they are. Model: configs/albert_base.json
(vocab_size = the SentencePiece model's: --vocab_size pieces, 18000 by default, as the
sample corpus allows at most 18,075 where albert_base has 30000; trained at start on the
built-in sample corpus and kept in --output_dir/spm), --dtype_policies (auto: float32 unless
the hardware computes bf16 natively), max_seq_length 128, batch 32. Random initial weights, nothing
downloaded, and the same in every system: one
albert_tf AlbertClassifier initialized from --seed, copied into each (keras-hub's backbone
through albert_tf.convert.keras_hub, Hugging Face's state dict through the converter's
table in albert_tf.convert.hf reversed, the 4-way head beside); the run checks it by
comparing every system's pieces and initial logits on the first dev sentences with
albert_tf's (results.json: tokenization_equal_to_albert_tf, initial_logits_max_abs_diff).

Systems (each trained for the same number of steps: --warmup_steps, then --steps per repeat):
- albert_tf, albert_tf_buckets_only, albert_tf_no_buckets: the ClassificationTask (classifier
  dropout 0.1) on the driver's Trainer (the release's AdamW, global-norm clipping 1.0, linear
  decay to 0), its train_dataset iterated (raw strings tokenized in tf.data by the
  preprocessing model). albert_tf is what users get: length_buckets default ("16,32,...")
  and the encoder skipping padding (per-token work on the real tokens only);
  albert_tf_buckets_only: the buckets, padding computed; albert_tf_no_buckets: every batch
  padded to 128 and computed, as the release (so the share of each mechanism shows). Evaluation:
  Trainer.per_example_outputs over the dev split. Requests: the raw-string classifier
  SavedModel written by export_classifier (buckets as trained; float32 whatever the training
  policy, as run_classifier exports it) and loaded back with
  tf.saved_model.load in this process; `model(tf.constant(texts))`.
- keras_hub: keras_hub.models.AlbertTextClassifier on an AlbertBackbone of the same dims
  and vocabulary, with its own AlbertTextClassifierPreprocessor (AlbertTokenizer built
  from the same SentencePiece proto bytes, sequence_length=128: every batch padded to 128,
  its users' default); compiled with keras.optimizers.AdamW (weight decay 0.01 except
  bias/gamma/beta, eps 1e-6, global_clipnorm 1.0, the same linear decay) and
  SparseCategoricalCrossentropy(from_logits=True), jit_compile per --keras_hub_jit_compile
  ("auto" is what its users get: off on a CPU-only machine). Training:
  train_on_batch(32 raw strings, labels) (keras-hub tokenizes inside). Evaluation:
  predict(dev strings, batch_size=32). Requests: the faster of predict_on_batch(strings)
  and predict(strings), picked in warm-up per request size and named in the results.
  Strings are normalized in Python first as the release does (preprocess_text: lower case,
  whitespace runs collapsed, accents stripped; timed), as a user of an uncased ALBERT vocabulary does:
  keras-hub's tokenizer does none of it, albert_tf's and (mostly) HF's do.
- hf: transformers' AlbertForSequenceClassification (PyTorch, CPU) in a separate process
  (benchmarks/hf_peer.py with --hf_python, default benchmarks/.peers-venv/bin/python made
  by benchmarks/make_peers_venv.sh), driven in JSON lines so its measurements interleave
  with the others'; per-batch padding (padding="longest") as its Trainer's collator does.
  Without that python the peer is skipped with the command that makes it.

Measurements, in --repeats rounds that interleave every system (a drift in the machine's
speed hits all of them), each round per system: --steps training steps (examples/s),
one pass over the dev split (examples/s), --calls one-request calls (batch 1, a short dev
sentence: p50 and p99 latency), --throughput_batches requests of 32 dev sentences
(examples/s). Medians over the rounds are reported. Warm-up (tracing, first calls) comes
before the rounds and is not timed. Dev accuracy after the last round (every system has
then trained warmup + repeats x steps steps from the same weights, each in its own data
order) is recorded, but from random weights a timed run is too short to say much.

Accuracy run (--accuracy_steps, default 400, about 7 epochs; 0 turns it off): after the
timed rounds, every system is built anew from one initial model at --accuracy_config (demo
by default, configs/albert_demo.json's dims: albert_base at keras-hub's speed on a CPU would
take hours), pretrained first, as fine-tuning starts (pretrained_start: --accuracy_pretrain_steps
LAMB steps of configs/demo.flags on the sample corpus, made once and reused), with a new 4-way
head, and trained --accuracy_steps steps at --accuracy_learning_rate, one system at a time,
then evaluated on the whole dev split (--max_dev_examples shortens only the timed passes).
It asks whether the systems compute the same training, so everything that is not the
implementation is made equal: the same batches of training examples in the same order
(training_batches; albert_tf pads each to its bucket, keras-hub to 128, HF to its longest),
the same optimizer formula (the release's AdamW: albert_tf's own, keras-hub compiled with
albert_tf's AdamWeightDecay, HF with hf_peer.py's torch copy of it), dropout --accuracy_dropout
(0: masks cannot be shared between frameworks), keras-hub's strings normalized as the
release does and HF fed albert_tf's piece ids (their tokenizers split a few texts otherwise).
What is left is float rounding, and training amplifies it: single-seed results of variants
that compute the same function differ by up to about two points (benchmarks/README.md,
"Figures moved out of docstrings"). So it runs --accuracy_seeds
seeds (8 by default; each a new head and batch order, every system trained from it) and
compares each system's mean; --accuracy_systems picks the systems (albert_tf's default variant,
keras-hub and HF unless told: the other variants compute the same function, tested). Its dev accuracies
(means and per seed), their spread and whether it is
within 1 point go to results.json (accuracy_run), the CSV and the chart's last panel.

Mixed precision: `--dtype_policies=float32,mixed_bfloat16 --systems=albert_tf,keras_hub` runs
albert_tf and keras-hub at both policies in the same rounds (keras-hub's backbone and
classifier built with dtype=policy) and adds the ratios of each policy over the first.

Writes results.json, results.csv and finetune_bench.png (bar chart) in --output_dir,
with the CPU model and its bf16 flags from /proc/cpuinfo and the fp32 matmul peak.
Ratios are albert_tf's speed over the peer's: examples/s over examples/s, and for
latency the peer's milliseconds over albert_tf's (> 1: albert_tf is faster).
"""

import csv
import json
import os
import statistics
import subprocess
import sys
import time

# benchmarks/ is on sys.path
from squad_bench import TINY_CONFIG, cpu_model, define_sentencepiece_flags, sentencepiece_model
from train_step_bench import matmul_peak_gflops

from albert_tf import entry_points
from albert_tf.training.precision import choose

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HERE = os.path.join(ROOT, "benchmarks")
DATA_DIR = os.path.join(ROOT, "notebooks", "data", "docstring_topics")
LABELS = ("concurrency", "networking", "numbers", "text")
DEFAULT_HF_PYTHON = os.path.join(HERE, ".peers-venv", "bin", "python")
SYSTEMS = ("albert_tf", "keras_hub", "hf")
# albert_tf's variants (name, length buckets, padding skipped): what users get, then each mechanism off
ALBERT_TF_VARIANTS = (("albert_tf", True, True), ("albert_tf_buckets_only", True, False),
                      ("albert_tf_no_buckets", False, False))
ACCURACY_SYSTEMS = tuple(name for name, _, _ in ALBERT_TF_VARIANTS) + ("keras_hub", "hf")
# --tiny: values used for the flags not given on the command line
# --accuracy_config: dims of the accuracy run's model (over configs/albert_base.json)
DEMO_DIMS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "embedding_size",
             "max_position_embeddings")
with open(os.path.join(ROOT, "configs", "albert_demo.json")) as _f:
    _demo = json.load(_f)
ACCURACY_CONFIGS = {"demo": {k: _demo[k] for k in DEMO_DIMS}, "tiny": TINY_CONFIG,
                    "small": {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 2,
                              "intermediate_size": 512, "embedding_size": 64, "max_position_embeddings": 128},
                    "base": {}}
TINY_DEFAULTS = {"accuracy_steps": 20, "accuracy_config": "tiny", "accuracy_pretrain_steps": 20, "accuracy_seeds": 1,
                 "accuracy_pretrain_corpus_mb": 0.2,
                 "steps": 2, "warmup_steps": 1, "repeats": 2, "calls": 5, "latency_warmup": 2,
                 "throughput_batches": 1, "vocab_size": 1000, "corpus_mb": 0.3, "max_dev_examples": 64}
METRICS = (("finetune_examples_per_second", "fine-tuning examples/s", True),
           ("eval_examples_per_second", "evaluation examples/s", True),
           ("latency_p50_ms", "1-request latency p50 ms", False),
           ("latency_p99_ms", "1-request latency p99 ms", False),
           ("batch32_examples_per_second", "batch-32 request examples/s", True))
SHORT = {"finetune_examples_per_second": "fine-tune", "eval_examples_per_second": "eval",
         "latency_p50_ms": "p50", "latency_p99_ms": "p99", "batch32_examples_per_second": "batch"}


def define_flags(flag_values):
    from absl import flags

    flags.DEFINE_integer("repeats", 3, "Interleaved rounds; the median is reported.", flag_values=flag_values)
    flags.DEFINE_integer("steps", 8, "Timed training steps per round and system.", flag_values=flag_values)
    flags.DEFINE_integer("warmup_steps", 2, "Untimed training steps before the rounds (tracing).",
                         flag_values=flag_values)
    flags.DEFINE_integer("calls", 100, "Timed one-request calls per round and system (p50, p99).",
                         flag_values=flag_values)
    flags.DEFINE_integer("latency_warmup", 10, "Untimed one-request calls before the rounds.", flag_values=flag_values)
    flags.DEFINE_integer("throughput_batches", 4, "Timed requests of --batch_size dev sentences per round and system.",
                         flag_values=flag_values)
    flags.DEFINE_integer("batch_size", 32, "Training, evaluation and request batch size.", flag_values=flag_values)
    flags.DEFINE_integer("max_seq_length", 128, "max_seq_length (keras-hub's sequence_length).",
                         flag_values=flag_values)
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (linear decay to 0 over all training steps).",
                       flag_values=flag_values)
    flags.DEFINE_integer("seed", 12345, "Seed of every system's initial weights and data order.",
                         flag_values=flag_values)
    define_sentencepiece_flags(flag_values)
    flags.DEFINE_string("data_dir", DATA_DIR, "train.tsv and dev.tsv with columns sentence, label.",
                        flag_values=flag_values)
    flags.DEFINE_integer("max_dev_examples", 0, "Use the first N dev examples (0: all).", flag_values=flag_values)
    flags.DEFINE_list("systems", list(SYSTEMS), "Which of albert_tf, keras_hub, hf to run.", flag_values=flag_values)
    flags.DEFINE_string("hf_python", DEFAULT_HF_PYTHON, "Python of the transformers peer's venv.",
                        flag_values=flag_values)
    flags.DEFINE_bool("jit_compile", False, "albert_tf: compile forward + backward with XLA.", flag_values=flag_values)
    flags.DEFINE_list("dtype_policies", ["auto"], "The dtype policies albert_tf (buckets, padding skipped) and "
                      "keras-hub run at, each resolved by albert_tf.training.precision (auto: mixed_bfloat16 only "
                      "on native-bf16 hardware). With two or more, systems are named system@policy and the "
                      "bucketing variants run at the first only; e.g. float32,mixed_bfloat16.", flag_values=flag_values)
    flags.DEFINE_enum("keras_hub_jit_compile", "auto", ["auto", "true", "false"],
                      "keras-hub compile(jit_compile=...); auto is Keras' default (off on CPU-only machines).",
                      flag_values=flag_values)
    flags.DEFINE_integer("accuracy_steps", 400, "The accuracy run: every system trained anew from one initial "
                         "model for this many steps (same seed, batch and schedule), then its dev accuracy; 0: no "
                         "accuracy run.", flag_values=flag_values)
    flags.DEFINE_enum("accuracy_config", "demo", list(ACCURACY_CONFIGS), "The accuracy run's model dims: demo "
                      "(configs/albert_demo.json: H 64, L 4), small (H 128, L 4), tiny (H 64, L 2) or base "
                      "(albert_base: hours for keras-hub on a CPU).", flag_values=flag_values)
    flags.DEFINE_integer("accuracy_pretrain_steps", 800, "The accuracy run starts from a model pretrained this many "
                         "LAMB steps (configs/demo.flags) on --accuracy_pretrain_corpus_mb of the sample corpus, "
                         "made once and reused from --output_dir/accuracy/pretrain; 0: from random weights.",
                         flag_values=flag_values)
    flags.DEFINE_float("accuracy_pretrain_corpus_mb", 1.5, "Sample corpus megabytes of that pretraining.",
                       flag_values=flag_values)
    flags.DEFINE_integer("accuracy_seeds", 8, "The accuracy run's seeds (each: a new head and batch order, every "
                         "system trained from it); a system's dev accuracy is its mean over them.",
                         flag_values=flag_values)
    flags.DEFINE_list("accuracy_systems", ["albert_tf", "keras_hub", "hf"], "The accuracy run's systems (of those "
                      f"--systems runs): any of {', '.join(ACCURACY_SYSTEMS)}. albert_tf's other variants compute "
                      "the same function (tested), so by default only the one users get is trained.",
                      flag_values=flag_values)
    flags.DEFINE_float("accuracy_dropout", 0.0, "The accuracy run's dropout (hidden, attention, classifier): 0, "
                       "so that every system computes the same function (dropout masks differ between frameworks).",
                       flag_values=flag_values)
    flags.DEFINE_float("accuracy_learning_rate", 2e-4, "The accuracy run's peak learning rate (linear decay to 0).",
                       flag_values=flag_values)
    flags.DEFINE_string("output_dir", "results/finetune_bench", "Where results (and the SentencePiece model) go.",
                        flag_values=flag_values)
    flags.DEFINE_bool("tiny", False, "Smoke test: a 2-layer hidden-64 config, few steps and calls, 64 dev "
                      "examples, a 1000-piece SentencePiece model (flags given explicitly still win).",
                      flag_values=flag_values)


def cpu_bf16_flags():
    """The CPU's bf16 / AMX feature flags from /proc/cpuinfo."""
    from albert_tf.training.precision import read_cpuinfo

    return sorted(x for x in read_cpuinfo()[1] if "bf16" in x or x.startswith("amx"))


def describe_machine(spm_model, vocab, spm_seconds):
    """Prints the CPU, its bf16 flags, its fp32 matmul peak and the SentencePiece model
    (`vocab` pieces, trained in spm_seconds or reused); returns (cpu, bf16 flags, peak GFLOP/s)."""
    cpu, bf16 = cpu_model(), cpu_bf16_flags()
    peak = matmul_peak_gflops()
    print(f"CPU: {cpu}; bf16 flags: {', '.join(bf16) or 'none'}; fp32 matmul peak (n=2048, graph, best of 5): "
          f"{peak:.1f} GFLOP/s", flush=True)
    print(f"SentencePiece model {spm_model}: {vocab} pieces" + (f" (trained in {spm_seconds:.1f}s)" if spm_seconds
                                                                 else " (reused)"), flush=True)
    return cpu, bf16, peak


def percentile(values, q):
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def throughput_texts(texts, k, batch):
    """The k-th batch-size request: consecutive dev sentences (the same for every system)."""
    i = (k * batch) % max(len(texts) - batch + 1, 1)
    return texts[i:i + batch]


# --- albert_tf -----------------------------------------------------------------------------


class AlbertTfSystem:
    """ClassificationTask on the driver's Trainer; requests through the exported classifier.
    Built with `init` (an AlbertClassifier)'s weights; `warm_up` traces, exports and loads."""

    def __init__(self, name, bucketed, ctx, init, skip_padding=True, dtype_policy="float32", classifier_dropout=0.1):
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (the exported classifier's SentencePiece ops)

        from albert_tf.data.bucket_widths import DEFAULT_BUCKETS
        from albert_tf.tasks.classification.data import get_task
        from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask, check_options
        from albert_tf.training.driver import Trainer, TrainingOptions

        self.name, self.tf, self.np, self.ctx = name, tf, np, ctx
        f = ctx.flags
        run_dir = os.path.join(ctx.out, name)
        options = ClassificationOptions(
            task_name="tsv", data_dir=f.data_dir, output_dir=run_dir, albert_config_file=ctx.config_file,
            spm_model_file=ctx.spm_model, max_seq_length=f.max_seq_length, do_train=True, do_eval=True,
            text_a_column="sentence", labels=list(LABELS), random_seed=f.seed, classifier_dropout=classifier_dropout,
            length_buckets=DEFAULT_BUCKETS if bucketed else "none")
        training = TrainingOptions(
            output_dir=run_dir, train_batch_size=f.batch_size, eval_batch_size=f.batch_size, optimizer="adamw",
            learning_rate=f.learning_rate, num_train_steps=ctx.total_steps, num_warmup_steps=0,
            jit_compile=f.jit_compile, write_curves=False, dtype_policy=dtype_policy)
        check_options(options, training)
        task_def = get_task("tsv", labels=list(LABELS), text_a_column="sentence")
        self.task = ClassificationTask(options, task_def, {"train": ctx.train_examples, "dev": ctx.dev_examples})
        self.trainer = Trainer(self.task, training)
        self.trainer.model.set_weights(init.get_weights())
        if not skip_padding:  # before anything is traced
            self.trainer.model.configure_runtime(skip_padding=False)
        self.skip_padding = bool(skip_padding and self.trainer.skips_padding)
        self.widths = self.task.widths
        self.path = {"train": "Trainer.train(train_dataset iterator)", "eval": "Trainer.per_example_outputs",
                     "latency": "exported classifier SavedModel __call__",
                     "batch32": "exported classifier SavedModel __call__"}
        self.info = {"length_buckets": list(self.widths), "skip_padding": self.skip_padding,
                     "jit_compile": bool(f.jit_compile), "dtype_policy": self.trainer.precision.policy}

    def initial_logits(self, texts):
        from albert_tf.tasks.classification.pipeline import pack

        inputs = pack(self.task.preprocess, self.tf.constant(list(texts)), None, self.ctx.flags.max_seq_length,
                      self.widths)
        return self.np.asarray(self.trainer.model(inputs, training=False))

    def warm_up(self):
        from albert_tf.tasks.classification.export import export_classifier

        f = self.ctx.flags
        self.start_training()
        start = time.perf_counter()
        self.trainer.train(self.iterator, f.warmup_steps)
        self.evaluate()  # traces the eval step for each width
        warm = time.perf_counter() - start
        start = time.perf_counter()
        export_dir = os.path.join(self.ctx.out, f"export_{self.name}")
        # float32 whatever the training policy, as run_classifier exports (a bf16 serving graph would
        # cast every shared weight at each of its 12 uses per request)
        export_classifier(self.task.preprocess, self.trainer.model_in("float32"), export_dir, f.max_seq_length,
                          list(LABELS), pair=False, task_name="docstring_topics", widths=self.widths,
                          skip_padding=self.skip_padding)
        self.served = self.tf.saved_model.load(export_dir)
        exported = time.perf_counter() - start
        self.info.update(export_dir=export_dir, warmup_seconds=round(warm, 2),
                         export_and_load_seconds=round(exported, 2))
        print(f"{self.name}: buckets {list(self.widths)}, skip padding {self.skip_padding}; warm-up {warm:.1f}s, "
              f"export + load {exported:.1f}s",
              flush=True)

    def start_training(self, batches=None):
        """Its own shuffled, bucketed order, or the given batches of training indices in order."""
        if batches is None:
            self.iterator = iter(self.task.train_dataset(None, self.ctx.flags.batch_size, 0))
        else:
            self.iterator = iter(self.task.batches_dataset(batches).prefetch(self.tf.data.AUTOTUNE))

    def tokenize(self, texts):
        ids = self.task.preprocess.tokenize(self.tf.constant(list(texts)))
        return [list(map(int, row)) for row in ids.to_list()]

    def train(self, steps):
        start = time.perf_counter()
        self.trainer.train(self.iterator, steps)
        return time.perf_counter() - start

    def evaluate(self):
        b = self.ctx.flags.batch_size
        start = time.perf_counter()
        outputs = self.trainer.per_example_outputs(self.task.split_dataset("dev", b), b)
        seconds = time.perf_counter() - start
        accuracy = float(self.np.mean(self.np.argmax(outputs["logits"], -1) == outputs["label"]))
        return seconds, accuracy

    def request(self, texts):
        return self.served(self.tf.constant(texts))["label_id"].numpy()

    def warm_requests(self, text, batches):
        for _ in range(self.ctx.flags.latency_warmup):
            self.request([text])
        for texts in batches:
            self.request(texts)


# --- keras-hub -----------------------------------------------------------------------------


class KerasHubSystem:
    """keras_hub.models.AlbertTextClassifier with its own preprocessor, as its users run it."""

    def __init__(self, ctx, init, name="keras_hub", dtype_policy="float32", classifier_dropout=0.1,
                 release_optimizer=False):
        import keras
        import keras_hub
        import numpy as np

        from albert_tf.convert.keras_hub import write_keras_hub_backbone

        self.np, self.ctx, self.name = np, ctx, name
        f, c = ctx.flags, ctx.config
        with open(ctx.spm_model, "rb") as fh:
            proto = fh.read()
        tokenizer = keras_hub.models.AlbertTokenizer(proto=proto)
        self.tokenizer = tokenizer
        preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer=tokenizer,
                                                                          sequence_length=f.max_seq_length)
        backbone = keras_hub.models.AlbertBackbone(
            vocabulary_size=c.vocab_size, num_layers=c.num_hidden_layers, num_heads=c.num_attention_heads,
            embedding_dim=c.embedding_size, hidden_dim=c.hidden_size, intermediate_dim=c.intermediate_size,
            num_groups=c.num_hidden_groups, num_inner_repetitions=c.inner_group_num,
            dropout=c.hidden_dropout_prob, max_sequence_length=c.max_position_embeddings, dtype=dtype_policy)
        self.model = keras_hub.models.AlbertTextClassifier(backbone=backbone, num_classes=len(LABELS),
                                                           preprocessor=preprocessor, dropout=classifier_dropout,
                                                           dtype=dtype_policy)
        # the same initial weights as albert_tf's (encoder through the converter's table, then the head)
        write_keras_hub_backbone(init.encoder, backbone)
        self.model.output_dense.set_weights(init.output_dense.get_weights())
        schedule = keras.optimizers.schedules.PolynomialDecay(f.learning_rate, ctx.total_steps, 0.0, power=1.0)
        if release_optimizer:  # albert_tf's (the release's) AdamW, a Keras optimizer; keras-hub's names
            from albert_tf.training.optimizer import AdamWeightDecay

            optimizer = AdamWeightDecay(learning_rate=schedule, global_clipnorm=1.0,
                                        exclude_from_weight_decay=("bias", "gamma", "beta", "layer_norm"))
        else:
            optimizer = keras.optimizers.AdamW(learning_rate=schedule, weight_decay=0.01, epsilon=1e-6,
                                               global_clipnorm=1.0)
            optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        jit = {"auto": "auto", "true": True, "false": False}[f.keras_hub_jit_compile]
        self.model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                           jit_compile=jit)
        self.jit_compile = bool(self.model.jit_compile)
        self.train_text = [e.text_a for e in ctx.train_examples]
        self.train_label = np.array([LABELS.index(e.label) for e in ctx.train_examples], np.int32)
        self.dev_text = [e.text_a for e in ctx.dev_examples]
        self.dev_label = np.array([LABELS.index(e.label) for e in ctx.dev_examples], np.int32)
        self.rng = np.random.default_rng(f.seed)
        self.order, self.position, self.batches = [], 0, None
        self.path = {"train": "train_on_batch(raw strings)", "eval": "predict(raw strings, batch_size)"}
        self.info = {"jit_compile": self.jit_compile, "dtype_policy": dtype_policy,
                     "padding": f"every batch padded to sequence_length={f.max_seq_length} (its preprocessor)",
                     "normalization": "the release's preprocess_text in Python before the preprocessor (timed)"}

    @staticmethod
    def prep(text):
        """The release's text normalization (albert_tf.data.tokenization.preprocess_text: spaces,
        accents stripped, lower case), which keras-hub's stock tokenizer leaves out."""
        from albert_tf.data.tokenization import preprocess_text

        return preprocess_text(text)

    def initial_logits(self, texts):
        return self.np.asarray(self.model.predict_on_batch([self.prep(t) for t in texts]))

    def warm_up(self):
        start = time.perf_counter()
        self.train(self.ctx.flags.warmup_steps)
        self.evaluate()
        warm = time.perf_counter() - start
        self.info["warmup_seconds"] = round(warm, 2)
        print(f"{self.name}: jit_compile {self.jit_compile}; warm-up {warm:.1f}s", flush=True)

    def tokenize(self, texts):
        return [list(map(int, self.np.asarray(self.tokenizer(self.prep(t))))) for t in texts]

    def start_training(self, batches=None):
        """Its own seeded order (default), or the given batches of training indices in order."""
        self.batches = None if batches is None else iter(batches)

    def _next_batch(self):
        if self.batches is not None:
            return self.np.asarray(next(self.batches))
        b = self.ctx.flags.batch_size
        if self.position + b > len(self.order):
            self.order, self.position = self.rng.permutation(len(self.train_text)), 0
        idx = self.order[self.position:self.position + b]
        self.position += b
        return idx

    def train(self, steps):
        start = time.perf_counter()
        for _ in range(steps):
            idx = self._next_batch()
            self.model.train_on_batch([self.prep(self.train_text[i]) for i in idx], self.train_label[idx])
        return time.perf_counter() - start

    def evaluate(self):
        start = time.perf_counter()
        logits = self.model.predict([self.prep(t) for t in self.dev_text], batch_size=self.ctx.flags.batch_size,
                                    verbose=0)
        seconds = time.perf_counter() - start
        return seconds, float(self.np.mean(self.np.argmax(logits, -1) == self.dev_label))

    def _predict_on_batch(self, texts):
        return self.np.argmax(self.model.predict_on_batch([self.prep(t) for t in texts]), -1)

    def _predict(self, texts):
        return self.np.argmax(self.model.predict([self.prep(t) for t in texts], batch_size=len(texts), verbose=0), -1)

    def warm_requests(self, text, batches):
        """Warms both request paths and keeps the faster one per request size."""
        paths = {"predict_on_batch(raw strings)": self._predict_on_batch, "predict(raw strings)": self._predict}
        chosen = {}
        for key, sample in (("latency", [[text]] * 3), ("batch32", batches[:2])):
            best = None
            for label, fn in paths.items():
                fn(sample[0])  # trace
                start = time.perf_counter()
                for texts in sample:
                    fn(texts)
                seconds = time.perf_counter() - start
                chosen.setdefault(key + "_candidates_seconds", {})[label] = round(seconds / len(sample), 5)
                if best is None or seconds < best[0]:
                    best = (seconds, label, fn)
            self.path[key] = best[1]
            chosen[key] = best[2]
        self._latency_fn, self._batch_fn = chosen.pop("latency"), chosen.pop("batch32")
        for _ in range(self.ctx.flags.latency_warmup):
            self._latency_fn([text])
        self.info.update(chosen)
        print(f"{self.name} requests: batch 1 via {self.path['latency']}, batch {self.ctx.flags.batch_size} via "
              f"{self.path['batch32']}", flush=True)

    def request(self, texts):
        return (self._latency_fn if len(texts) == 1 else self._batch_fn)(texts)


# --- Hugging Face transformers (separate process) -------------------------------------------


class PeerUnavailable(Exception):
    pass


def hf_state_dict(classifier):
    """AlbertForSequenceClassification's state dict (name -> array) holding an albert_tf
    AlbertClassifier's weights: the encoder through the converter's Hugging Face table
    (albert_tf.convert.hf, reversed), the head transposed to torch's [out, in]."""
    import numpy as np

    from albert_tf.convert import hf
    from albert_tf.convert.rename import apply_transforms, model_variables, rename
    from albert_tf.convert.templates import reverse, to_regex_table

    source = {path: np.asarray(v) for path, v in model_variables(classifier.encoder).items()}
    values = apply_transforms(rename(source, to_regex_table(reverse(hf.HF_ENCODER_TABLE))))
    state = {f"albert.{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in values.items()}
    kernel, bias = classifier.output_dense.get_weights()
    state["classifier.weight"] = np.ascontiguousarray(kernel.T, dtype=np.float32)
    state["classifier.bias"] = np.asarray(bias, np.float32)
    return state


class HfSystem:
    """benchmarks/hf_peer.py in the peers venv, driven in JSON lines. With piece_ids
    ({"train": [[ids]], "dev": [[ids]]}) it trains and evaluates on albert_tf's pieces
    instead of its own tokenizer's."""

    name = "hf"

    def __init__(self, ctx, init, classifier_dropout=0.1, release_optimizer=False, piece_ids=None):
        f = ctx.flags
        self.ctx, self.batches = ctx, None
        python = f.hf_python
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise PeerUnavailable(f"{python} not found: create the peers venv with "
                                  "`bash benchmarks/make_peers_venv.sh` "
                                  "(or pass --hf_python=/path/to/python with torch, transformers, sentencepiece, "
                                  "protobuf)")
        from albert_tf.storage import atomic

        data_json = os.path.join(ctx.out, "hf_data.json")
        atomic.write_json(data_json, {
            "labels": list(LABELS),
            "train": {"text": [e.text_a for e in ctx.train_examples],
                      "label": [LABELS.index(e.label) for e in ctx.train_examples],
                      **({"ids": piece_ids["train"]} if piece_ids else {})},
            "dev": {"text": [e.text_a for e in ctx.dev_examples],
                    "label": [LABELS.index(e.label) for e in ctx.dev_examples],
                    **({"ids": piece_ids["dev"]} if piece_ids else {})}}, indent=None)
        init_npz = os.path.join(ctx.out, "hf_init.npz")
        with atomic.open_file(init_npz, "wb", encoding=None) as fh:
            import numpy as np

            np.savez(fh, **hf_state_dict(init))
        self.log_path = os.path.join(ctx.out, "hf_peer.log")
        self.log = open(self.log_path, "w")
        env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [python, os.path.join(HERE, "hf_peer.py"), f"--data_json={data_json}", f"--spm_model={ctx.spm_model}",
             f"--config_json={ctx.config_file}", f"--max_seq_length={f.max_seq_length}",
             f"--batch_size={f.batch_size}", f"--learning_rate={f.learning_rate}",
             f"--total_steps={ctx.total_steps}", f"--seed={f.seed}", f"--init_npz={init_npz}",
             f"--classifier_dropout={classifier_dropout}",
             f"--optimizer={'release_adamw' if release_optimizer else 'adamw'}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        try:
            ready = self._read()
            if not ready.get("ready"):
                raise PeerUnavailable(f"hf_peer.py did not start: {ready}")
            self.peer_info = self.ask({"cmd": "info", "probe": []})
        except BaseException:
            self.close()
            raise
        self.path = {"train": "per-batch tokenizer(padding='longest') + AdamW step (torch, CPU)",
                     "eval": "inference_mode, dev batches padded to their longest",
                     "latency": "tokenizer + model under inference_mode",
                     "batch32": "tokenizer + model under inference_mode"}
        self.info = dict({k: v for k, v in self.peer_info.items() if k != "probe_ids"}, log=self.log_path)

    def initial_logits(self, texts):
        import numpy as np

        return np.asarray(self.ask({"cmd": "logits", "texts": list(texts)})["logits"])

    def warm_up(self):
        start = time.perf_counter()
        self.ask({"cmd": "train", "steps": self.ctx.flags.warmup_steps})
        self.ask({"cmd": "eval"})
        warm = time.perf_counter() - start
        self.info["warmup_seconds"] = round(warm, 2)
        print(f"hf: transformers {self.peer_info['versions']['transformers']}, torch "
              f"{self.peer_info['versions']['torch']} ({self.peer_info['threads']} threads, attention "
              f"{self.peer_info['attn_implementation']}); warm-up {warm:.1f}s", flush=True)

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.log.flush()
            with open(self.log_path) as fh:
                tail = fh.read()[-2000:]
            raise PeerUnavailable(f"hf_peer.py exited (status {self.proc.poll()}); its log {self.log_path} "
                                  f"ends:\n{tail}")
        return json.loads(line)

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise PeerUnavailable(f"hf_peer.py: {reply['error']} (log: {self.log_path})")
        return reply

    def tokenize(self, texts):
        ids = self.ask({"cmd": "info", "probe": list(texts)})["probe_ids"]
        return [row[1:-1] for row in ids]  # without [CLS] and [SEP]

    def start_training(self, batches=None):
        """Its own seeded order (default), or the given batches of training indices in order."""
        self.batches = None if batches is None else [list(map(int, b)) for b in batches]

    def train(self, steps):
        request = {"cmd": "train", "steps": steps}
        if self.batches is not None:
            request["batches"], self.batches = self.batches[:steps], self.batches[steps:]
        return self.ask(request)["seconds"]

    def evaluate(self):
        reply = self.ask({"cmd": "eval"})
        return reply["seconds"], reply["accuracy"]

    def warm_requests(self, text, batches):
        self.ask({"cmd": "latency", "calls": self.ctx.flags.latency_warmup, "text": text})
        self.ask({"cmd": "throughput", "batches": len(batches)})

    def latency_ms(self, calls, text):
        return self.ask({"cmd": "latency", "calls": calls, "text": text})["ms"]

    def throughput(self, batches):
        reply = self.ask({"cmd": "throughput", "batches": batches})
        return reply["examples"] / reply["seconds"]

    def close(self):
        """Asks the peer to quit (it also ends when its stdin closes); kills it if it hangs."""
        try:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.stdin.close()
        except (OSError, ValueError):  # already gone
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# --- the run -------------------------------------------------------------------------------


class Context:
    pass


def time_latency(system, calls, text):
    if hasattr(system, "latency_ms"):
        return system.latency_ms(calls, text)
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        system.request([text])
        out.append((time.perf_counter() - start) * 1e3)
    return out


def time_throughput(system, batches, texts, batch):
    if hasattr(system, "throughput"):
        return system.throughput(batches)
    count = 0
    start = time.perf_counter()
    for k in range(batches):
        chunk = throughput_texts(texts, k, batch)
        system.request(chunk)
        count += len(chunk)
    return count / (time.perf_counter() - start)


def apply_tiny_defaults(f):
    if f.tiny:
        for name, value in TINY_DEFAULTS.items():
            if not f[name].present:
                setattr(f, name, value)


def accuracy_summary(accuracies, train_examples, dev_examples):
    """{dev_accuracy, spread_points, within_1_point, majority_baseline} of one set of runs; the
    majority baseline predicts the most frequent training label on the dev split."""
    import numpy as np

    spread = (max(accuracies.values()) - min(accuracies.values())) if accuracies else 0.0
    dev = np.bincount([LABELS.index(e.label) for e in dev_examples], minlength=len(LABELS))
    train = np.bincount([LABELS.index(e.label) for e in train_examples], minlength=len(LABELS))
    majority = float(dev[int(np.argmax(train))] / max(len(dev_examples), 1))
    return {"dev_accuracy": accuracies, "spread_points": round(100 * spread, 2), "within_1_point": spread <= 0.01,
            "majority_baseline": round(majority, 4)}


def training_batches(count, batch_size, steps, seed):
    """`steps` batches of training indices: a seeded permutation per epoch, the partial batch
    dropped (what every system trains on in the accuracy run)."""
    import numpy as np

    if count < batch_size:
        raise ValueError(f"the training split has {count} examples, fewer than one batch of {batch_size}")
    rng, out = np.random.default_rng(seed), []
    while len(out) < steps:
        order = rng.permutation(count)
        out += [order[i:i + batch_size].tolist() for i in range(0, count - batch_size + 1, batch_size)]
    return out[:steps]


def _tool(argv, log_path, what):
    """Runs `python argv...` from the repo root, its output to log_path; a failure names the log."""
    with open(log_path, "w") as log:
        result = subprocess.run([sys.executable, *argv], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode:
        with open(log_path) as log:
            tail = log.read()[-3000:]
        raise RuntimeError(f"{what} failed (exit status {result.returncode}); {log_path} ends:\n{tail}")


def pretrained_start(f, ctx, config_file):
    """A pretraining run of the accuracy run's model (configs/demo.flags: LAMB, MLM + SOP) on
    --accuracy_pretrain_corpus_mb of the sample corpus with the benchmark's SentencePiece
    model, through tools/create_pretraining_data.py and albert_tf.run_pretraining; made
    once per settings and reused. Returns the run directory (its newest checkpoint)."""
    from albert_tf.data.sample_corpus import source_for, write_corpus
    from albert_tf.storage import atomic

    out = os.path.join(ctx.out, "accuracy", "pretrain")
    sidecar = os.path.join(out, "settings.json")
    with open(config_file) as fh:
        settings = {"config": json.load(fh), "steps": f.accuracy_pretrain_steps, "seed": f.seed,
                    "corpus_mb": f.accuracy_pretrain_corpus_mb, "spm_model": os.path.abspath(ctx.spm_model),
                    "spm_bytes": os.path.getsize(ctx.spm_model)}
    run_dir = os.path.join(out, "run")
    if os.path.isfile(sidecar):
        with open(sidecar) as fh:
            if json.load(fh) == settings:
                print(f"accuracy run: reusing the pretrained start {run_dir}", flush=True)
                return run_dir
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    start = time.perf_counter()
    corpus = os.path.join(out, "corpus.txt")
    write_corpus(corpus, f.accuracy_pretrain_corpus_mb, source_for(f.accuracy_pretrain_corpus_mb))
    records = os.path.join(out, "records", "train.tfrecord")
    print(f"accuracy run: pretraining its start ({f.accuracy_pretrain_steps} steps on "
          f"{f.accuracy_pretrain_corpus_mb} MB of the sample corpus; logs in {out})", flush=True)
    _tool(["tools/create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={records}",
           f"--spm_model_file={ctx.spm_model}", "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--dupe_factor=2", "--num_workers=2", "--num_output_shards=2", f"--random_seed={f.seed}"],
          os.path.join(out, "create_pretraining_data.log"), "create_pretraining_data.py")
    steps = f.accuracy_pretrain_steps
    _tool(["-m", "albert_tf.run_pretraining", "--flagfile=configs/demo.flags", f"--albert_config_file={config_file}",
           f"--input_file={records}-*", f"--output_dir={run_dir}", f"--num_train_steps={steps}",
           f"--num_warmup_steps={max(steps // 10, 1)}", f"--save_checkpoints_steps={steps}",
           f"--iterations_per_loop={min(50, steps)}", "--nodo_eval", f"--random_seed={f.seed}"],
          os.path.join(out, "run_pretraining.log"), "run_pretraining")
    with open(os.path.join(out, "run_pretraining.log")) as fh:
        last = [line.strip() for line in fh if line.startswith("step ")][-1:]
    atomic.write_json(sidecar, settings)
    print(f"accuracy run: pretrained in {time.perf_counter() - start:.0f}s; {''.join(last)}", flush=True)
    return run_dir


def accuracy_run(f, ctx):
    """Dev accuracy at equal training: for each of --accuracy_seeds seeds, every system built
    anew from one initial AlbertClassifier at --accuracy_config (the pretrained start, the
    head drawn from the seed), trained --accuracy_steps steps on the seed's batches with the
    same schedule and optimizer formula, then evaluated on the whole dev split; a system's
    accuracy is its mean over the seeds. One system at a time, at the first dtype policy;
    returns the results' `accuracy_run` block."""
    import gc
    from types import SimpleNamespace

    import numpy as np

    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    acc = Context()
    acc.flags = SimpleNamespace(**dict(f.flag_values_dict(), learning_rate=f.accuracy_learning_rate))
    os.makedirs(os.path.join(ctx.out, "accuracy"), exist_ok=True)
    # the whole dev split, whatever --max_dev_examples (which only shortens the timed passes)
    acc.spm_model, acc.train_examples, acc.dev_examples = ctx.spm_model, ctx.train_examples, ctx.all_dev_examples
    acc.config = ctx.base_config.replace(**ACCURACY_CONFIGS[f.accuracy_config],
                                         hidden_dropout_prob=f.accuracy_dropout,
                                         attention_probs_dropout_prob=f.accuracy_dropout)
    acc.config_file = os.path.join(ctx.out, "accuracy", "albert_config.json")
    acc.config.to_json_file(acc.config_file)
    acc.total_steps = f.accuracy_steps
    c = acc.config
    drop = f.accuracy_dropout
    pretrainer = AlbertPretrainer(acc.config)
    start_from = "random weights"
    if f.accuracy_pretrain_steps:
        from albert_tf.training.checkpoints import load_init_checkpoint

        start_from = pretrained_start(f, ctx, acc.config_file)
        load_init_checkpoint(pretrainer, start_from)
    init = AlbertClassifier(pretrainer.encoder, len(LABELS), dropout=drop,
                            initializer_range=acc.config.initializer_range)
    print(f"\naccuracy run: {f.accuracy_config} config (H {c.hidden_size}, L {c.num_hidden_layers}, "
          f"I {c.intermediate_size}) from {start_from}, {acc.total_steps} steps of batch {f.batch_size}, peak "
          f"learning rate {f.accuracy_learning_rate}, dropout {drop}: every system from the same weights, on the same "
          "batches, with the release's AdamW", flush=True)
    init(ctx.probe_inputs, training=False)  # builds the head
    policy = ctx.policies[0]
    makers = []
    if "albert_tf" in f.systems:
        makers += [(name, lambda name=name, bucketed=bucketed, skip=skip: AlbertTfSystem(
            name, bucketed, acc, init, skip_padding=skip, dtype_policy=policy, classifier_dropout=drop))
            for name, bucketed, skip in ALBERT_TF_VARIANTS if name in f.accuracy_systems]
    if "keras_hub" in f.systems and "keras_hub" in f.accuracy_systems:
        makers.append(("keras_hub", lambda: KerasHubSystem(acc, init, dtype_policy=policy, classifier_dropout=drop,
                                                           release_optimizer=True)))
    if "hf" in f.systems and "hf" in f.accuracy_systems:
        import tensorflow as tf

        def pieces(examples):
            tokens = ctx.preprocess.tokenize(tf.constant([e.text_a for e in examples]))
            return [list(map(int, r)) for r in tokens.to_list()]

        ids = {"train": pieces(acc.train_examples), "dev": pieces(acc.dev_examples)}
        makers.append(("hf", lambda: HfSystem(acc, init, classifier_dropout=drop, release_optimizer=True,
                                              piece_ids=ids)))
    per_seed, seconds, skipped, seed_spreads = {}, {}, {}, []
    seeds = [f.seed + k for k in range(f.accuracy_seeds)]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        kernel, bias = init.output_dense.get_weights()
        r = acc.config.initializer_range
        draw = rng.normal(0.0, r, kernel.shape)
        while np.any(np.abs(draw) > 2 * r):  # truncated at 2 sigma, as the model's initializer
            draw = np.where(np.abs(draw) > 2 * r, rng.normal(0.0, r, kernel.shape), draw)
        init.output_dense.set_weights([draw.astype(kernel.dtype), np.zeros_like(bias)])
        batches = training_batches(len(acc.train_examples), f.batch_size, acc.total_steps, seed)
        acc.out = os.path.join(ctx.out, "accuracy", f"seed_{seed}")  # run directories: nothing to resume
        os.makedirs(acc.out, exist_ok=True)
        this_seed = {}
        for name, make in makers:
            if name in skipped:
                continue
            try:
                system = make()
                try:
                    system.start_training(batches)
                    seconds.setdefault(name, []).append(round(system.train(acc.total_steps), 2))
                    this_seed[name] = round(system.evaluate()[1], 4)
                finally:
                    if hasattr(system, "close"):
                        system.close()
            except PeerUnavailable as e:
                skipped[name] = str(e)
                print(f"accuracy run: {name} SKIPPED: {e}", flush=True)
                continue
            per_seed.setdefault(name, []).append(this_seed[name])
            print(f"accuracy run, seed {seed}: {name} dev accuracy {this_seed[name]:.4f} ({seconds[name][-1]:.1f}s of "
                  "training)", flush=True)
            del system
            gc.collect()
        seed_spreads.append(round(100 * (max(this_seed.values()) - min(this_seed.values())), 2) if this_seed else 0.0)
    accuracies = {name: round(float(np.mean(values)), 4) for name, values in per_seed.items()}
    dims = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "embedding_size")
    return {"config": f.accuracy_config, "dims": {k: getattr(c, k) for k in dims},
            "dev_examples": len(acc.dev_examples), "steps": acc.total_steps, "batch_size": f.batch_size,
            "learning_rate": f.accuracy_learning_rate, "dropout": drop, "start": start_from,
            "pretrain_steps": f.accuracy_pretrain_steps, "optimizer": "the release's AdamW in every system",
            "batches": "the same batches of training examples, in the same order, in every system",
            **accuracy_summary(accuracies, acc.train_examples, acc.dev_examples),
            "seeds": seeds, "dev_accuracy_per_seed": per_seed, "spread_points_per_seed": seed_spreads,
            "train_seconds": seconds, "skipped": skipped}


def plot(rows, path, title, accuracy=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from albert_tf.storage import atomic

    panels = [(k, label) for k, label, _ in METRICS] + [("dev_accuracy", "dev accuracy")]
    if accuracy:  # the accuracy run's numbers in the last panel
        panels[-1] = ("accuracy_run_dev_accuracy",
                      f"dev accuracy after {accuracy['steps']} steps ({accuracy['config']} config)")
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5))
    names = [r["system"] for r in rows]
    colors = [plt.cm.tab10(i % 10) for i in range(len(rows))]
    for ax, (key, label) in zip(axes.flat, panels):
        values = [r.get(key) for r in rows]  # None: not measured (no bar, "n/a"), never drawn as a 0
        bars = ax.bar(range(len(rows)), [v or 0.0 for v in values], color=colors)
        for bar, value in zip(bars, values):
            ax.annotate("n/a" if value is None else f"{value:.3g}", (bar.get_x() + bar.get_width() / 2,
                        bar.get_height()), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(names, rotation=15, fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic.output_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path


def run(f):
    apply_tiny_defaults(f)
    for name in ("repeats", "steps", "warmup_steps", "calls", "latency_warmup", "throughput_batches", "batch_size"):
        if getattr(f, name) < 1:
            raise ValueError(f"--{name} must be positive.")
    if f.accuracy_steps < 0:
        raise ValueError("--accuracy_steps must be >= 0 (0: no accuracy run).")
    if f.accuracy_seeds < 1:
        raise ValueError("--accuracy_seeds must be >= 1.")
    if f.accuracy_pretrain_steps < 0:
        raise ValueError("--accuracy_pretrain_steps must be >= 0 (0: the accuracy run from random weights).")
    unknown = [s for s in f.accuracy_systems if s not in ACCURACY_SYSTEMS]
    if f.accuracy_steps and (unknown or not f.accuracy_systems):
        raise ValueError(f"--accuracy_systems: {unknown or 'empty'}; choose from {', '.join(ACCURACY_SYSTEMS)}.")
    unknown = [s for s in f.systems if s not in SYSTEMS]
    if unknown or not f.systems:
        raise ValueError(f"--systems: {unknown or 'empty'}; choose from {', '.join(SYSTEMS)}.")
    import keras
    import numpy as np
    import tensorflow as tf

    # Seeded once, before any tokenizer exists: tf.random.set_seed (inside set_random_seed)
    # clears TensorFlow's eager kernel cache, and with it the SentencePiece resources of every
    # tf_text tokenizer made before (albert_tf's preprocessing and keras-hub's tokenizer alike),
    # which then fail with "Resource .../SentencepieceOp ... does not exist".
    keras.utils.set_random_seed(f.seed)
    from albert_tf.tasks.classification.data import get_task, read_examples
    from albert_tf.tasks.classification.pipeline import packed_lengths
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.export.preprocess_module import PreprocessModule
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.storage import atomic

    ctx = Context()
    ctx.flags = f
    ctx.out = out = f.output_dir if os.path.isabs(f.output_dir) else os.path.join(ROOT, f.output_dir)
    os.makedirs(out, exist_ok=True)

    # --- inputs ----------------------------------------------------------------------------
    ctx.spm_model, spm_seconds = sentencepiece_model(out, f.vocab_size, f.corpus_mb)
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "albert_base.json"))
    pre = ctx.preprocess = PreprocessModule(ctx.spm_model, seq_length=f.max_seq_length)
    vocab = SentencePieceTokenizer(ctx.spm_model).vocab_size
    ctx.base_config = config.replace(vocab_size=vocab)
    config = ctx.base_config.replace(**(TINY_CONFIG if f.tiny else {}))
    if f.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={f.max_seq_length} exceeds max_position_embeddings "
                         f"({config.max_position_embeddings}).")
    ctx.config = config
    ctx.config_file = os.path.join(out, "albert_config.json")
    config.to_json_file(ctx.config_file)
    task_def = get_task("tsv", labels=list(LABELS), text_a_column="sentence")
    ctx.train_examples = read_examples(task_def, f.data_dir, "train")
    ctx.dev_examples = ctx.all_dev_examples = read_examples(task_def, f.data_dir, "dev")
    if f.max_dev_examples:
        ctx.dev_examples = ctx.dev_examples[:f.max_dev_examples]
    ctx.total_steps = f.warmup_steps + f.repeats * f.steps
    dev_text = [e.text_a for e in ctx.dev_examples]
    lengths = packed_lengths(pre, dev_text, None, f.max_seq_length)
    train_lengths = packed_lengths(pre, [e.text_a for e in ctx.train_examples], None, f.max_seq_length)
    by_length = sorted(range(len(dev_text)), key=lambda i: (lengths[i], i))
    short = dev_text[by_length[len(by_length) // 4]]  # the 25th-percentile length: a short request
    short_len = int(lengths[by_length[len(by_length) // 4]])
    batch_texts = [throughput_texts(dev_text, k, f.batch_size) for k in range(f.throughput_batches)]

    cpu, bf16, peak = describe_machine(ctx.spm_model, vocab, spm_seconds)
    print(f"{'tiny' if f.tiny else 'albert_base'} config (H {config.hidden_size}, L {config.num_hidden_layers}, "
          f"V {vocab}), max_seq_length {f.max_seq_length}, batch {f.batch_size}; topic task: "
          f"{len(ctx.train_examples)} train / {len(ctx.dev_examples)} dev sentences, packed length median "
          f"{statistics.median(train_lengths.tolist()):.0f} (p95 {percentile(train_lengths, 95):.0f}, max "
          f"{int(train_lengths.max())}); {ctx.total_steps} training steps each "
          f"({f.warmup_steps} warm-up + {f.repeats} x {f.steps})", flush=True)
    print(f"one-request text ({short_len} tokens packed): {short!r}", flush=True)

    # --- systems: built from the same initial weights, checked, then warmed up ---------------
    from albert_tf.tasks.classification.pipeline import pack
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    init = AlbertClassifier(AlbertPretrainer(config).encoder, len(LABELS), dropout=0.1,
                            initializer_range=config.initializer_range)
    probe = dev_text[:3]
    reference_ids = [list(map(int, row)) for row in pre.tokenize(tf.constant(probe)).to_list()]
    ctx.probe_inputs = pack(pre, tf.constant(probe), None, f.max_seq_length)
    reference_logits = np.asarray(init(ctx.probe_inputs, training=False))
    systems, skipped, peers = [], {}, []
    ctx.policies = policies = []
    for requested in f.dtype_policies:
        chosen = choose(requested)
        print(f"--dtype_policies {requested}: {chosen.policy} ({chosen.reason})", flush=True)
        if chosen.policy not in policies:
            policies.append(chosen.policy)

    def named(base, policy):
        return base if len(policies) == 1 else f"{base}@{policy}"

    for i, policy in enumerate(policies):
        if "albert_tf" in f.systems:
            # every variant at the first policy, only the default one at the others
            for name, bucketed, skip in ALBERT_TF_VARIANTS[:None if i == 0 else 1]:
                systems.append(AlbertTfSystem(named(name, policy), bucketed, ctx, init, skip_padding=skip,
                                              dtype_policy=policy))
        if "keras_hub" in f.systems:
            systems.append(KerasHubSystem(ctx, init, named("keras_hub", policy), dtype_policy=policy))
    # every system's tokenization and initial logits of the first dev sentences against albert_tf's
    tokenization, logits_diff = {}, {}

    def check_start(s):
        ids = s.tokenize(probe)
        tokenization[s.name] = ("equal" if ids == reference_ids else "same counts, different pieces"
                                if [len(x) for x in ids] == [len(x) for x in reference_ids] else "different")
        logits_diff[s.name] = float(np.max(np.abs(s.initial_logits(probe) - reference_logits)))

    for s in systems:
        check_start(s)
    if "hf" in f.systems:
        try:
            hf = HfSystem(ctx, init)
            peers.append(hf)
            check_start(hf)
            hf.warm_up()
            hf.warm_requests(short, batch_texts)
            systems.append(hf)
        except PeerUnavailable as e:
            skipped["hf"] = str(e)
            print(f"hf: SKIPPED: {e}", flush=True)
    print("same start, checked on the first dev sentences: " + "; ".join(
        f"{n}: pieces {tokenization[n]}, initial logits max |diff| {logits_diff[n]:.1e}" for n in tokenization),
          flush=True)
    for s in systems:
        if not isinstance(s, HfSystem):
            s.warm_up()
            s.warm_requests(short, batch_texts)

    # --- interleaved rounds ----------------------------------------------------------------
    record = {s.name: {"finetune": [], "eval": [], "p50": [], "p99": [], "batch32": [], "accuracy": None}
              for s in systems}
    try:
        for r in range(f.repeats):
            for s in list(systems):
                rec = record[s.name]
                try:
                    rec["finetune"].append(f.steps * f.batch_size / s.train(f.steps))
                    seconds, accuracy = s.evaluate()
                    rec["eval"].append(len(ctx.dev_examples) / seconds)
                    rec["accuracy"] = accuracy
                    ms = time_latency(s, f.calls, short)
                    rec["p50"].append(percentile(ms, 50))
                    rec["p99"].append(percentile(ms, 99))
                    rec["batch32"].append(time_throughput(s, f.throughput_batches, dev_text, f.batch_size))
                except PeerUnavailable as e:  # the transformers peer failed: report the others
                    skipped[s.name] = str(e)
                    print(f"{s.name}: SKIPPED: {e}", flush=True)
                    systems.remove(s)
                    del record[s.name]
            print(f"round {r + 1}/{f.repeats}: " + "; ".join(
                f"{n} train {v['finetune'][-1]:.2f}/s eval {v['eval'][-1]:.1f}/s p50 {v['p50'][-1]:.1f}ms "
                f"b{f.batch_size} {v['batch32'][-1]:.1f}/s" for n, v in record.items()), flush=True)
    finally:
        for s in peers:
            s.close()

    # --- results ---------------------------------------------------------------------------
    rows = []
    for s in systems:
        rec = record[s.name]
        rows.append({
            "system": s.name,
            "finetune_examples_per_second": round(statistics.median(rec["finetune"]), 3),
            "eval_examples_per_second": round(statistics.median(rec["eval"]), 3),
            "latency_p50_ms": round(statistics.median(rec["p50"]), 3),
            "latency_p99_ms": round(statistics.median(rec["p99"]), 3),
            "batch32_examples_per_second": round(statistics.median(rec["batch32"]), 3),
            "dev_accuracy": round(rec["accuracy"], 4),
            "train_path": s.path["train"], "eval_path": s.path["eval"], "latency_path": s.path["latency"],
            "batch32_path": s.path["batch32"],
            "runs": {k: [round(x, 3) for x in rec[k]] for k in ("finetune", "eval", "p50", "p99", "batch32")},
        })
    by = {r["system"]: r for r in rows}

    def speedup(ours, peer):
        out_ = {}
        for key, _, higher in METRICS:
            a, b = by[ours][key], by[peer][key]
            out_[key] = round((a / b) if higher else (b / a), 3) if a and b else None
        return out_

    ratios = {}
    first = policies[0]
    pairs = []
    for policy in policies:
        for ours, _, _ in ALBERT_TF_VARIANTS:
            pairs += [(named(ours, policy), named("keras_hub", q)) for q in policies]
            pairs.append((named(ours, policy), "hf"))
    # the share of each mechanism: bucketing alone, then skipping padding on top of it
    pairs += [(named(a, first), named(b, first)) for a, b in (
        ("albert_tf_buckets_only", "albert_tf_no_buckets"), ("albert_tf", "albert_tf_buckets_only"),
        ("albert_tf", "albert_tf_no_buckets"))]
    # each policy against the first (e.g. mixed_bfloat16 over float32)
    pairs += [(named(s_, p), named(s_, first)) for p in policies[1:] for s_ in ("albert_tf", "keras_hub")]
    for ours, peer in pairs:
        if ours in by and peer in by and ours != peer:
            ratios[f"{ours}/{peer}"] = speedup(ours, peer)

    accuracies = {r["system"]: r["dev_accuracy"] for r in rows}
    accuracy = accuracy_summary(accuracies, ctx.train_examples, ctx.dev_examples)
    majority = accuracy["majority_baseline"]
    near_chance = bool(accuracies) and max(accuracies.values()) < max(majority, 1 / len(LABELS)) + 0.05
    accuracy.update(chance=1 / len(LABELS), near_chance=near_chance, training_steps=ctx.total_steps)
    accuracy_run_ = accuracy_run(f, ctx) if f.accuracy_steps > 0 else None
    for r in rows if accuracy_run_ else ():  # the accuracy run ran the first policy's systems
        name = r["system"].removesuffix(f"@{first}")
        r["accuracy_run_dev_accuracy"] = None if "@" in name else accuracy_run_["dev_accuracy"].get(name)

    # --- print -----------------------------------------------------------------------------
    print(f"\nmedians of {f.repeats} interleaved rounds ({'tiny' if f.tiny else 'albert_base'}, seq "
          f"{f.max_seq_length}, batch {f.batch_size}; examples/s unless ms):")
    print(f"{'system':<30}{'fine-tune':>12}{'eval':>12}{'p50 ms':>10}{'p99 ms':>10}{'batch ' + str(f.batch_size):>12}"
          f"{'dev acc':>9}")
    for r in rows:
        print(f"{r['system']:<30}{r['finetune_examples_per_second']:>12.2f}{r['eval_examples_per_second']:>12.2f}"
              f"{r['latency_p50_ms']:>10.2f}{r['latency_p99_ms']:>10.2f}{r['batch32_examples_per_second']:>12.2f}"
              f"{r['dev_accuracy']:>9.4f}")
    if ratios:
        print("\nspeed ratios (albert_tf's speed / the other's; latency: the other's ms / albert_tf's; > 1: albert_tf "
              "faster):")
        for name, values in ratios.items():
            print(f"{name:<46}" + "  ".join(f"{SHORT[k]} {'-' if v is None else f'{v:.2f}x'}"
                                            for k, v in values.items()))
    print(f"\ndev accuracy after {ctx.total_steps} steps: "
          + ", ".join(f"{k} {v:.4f}" for k, v in accuracies.items())
          + f"; spread {accuracy['spread_points']:.1f} points "
          f"({'within' if accuracy['within_1_point'] else 'NOT within'} 1 point); "
          f"majority baseline {majority:.4f}")
    if near_chance:
        print(f"NOTE: every system is near chance (random initial weights, {ctx.total_steps} steps): the accuracy "
              "comparison says little here; see the accuracy run (--accuracy_steps).")
    if accuracy_run_:
        a = accuracy_run_
        start = "a pretrained start" if a["pretrain_steps"] else "random weights"
        print(f"accuracy run ({a['config']} config from {start}"
              f", {a['steps']} steps, learning rate {a['learning_rate']}, mean over seeds {a['seeds']}): "
              + ", ".join(f"{k} {v:.4f}" for k, v in a["dev_accuracy"].items())
              + f"; spread {a['spread_points']:.1f} points ({'within' if a['within_1_point'] else 'NOT within'} "
              f"1 point) on {a['dev_examples']} dev sentences; majority baseline {a['majority_baseline']:.4f}; "
              f"spread per seed {a['spread_points_per_seed']} points")
    for name, why in skipped.items():
        print(f"{name} skipped: {why}")

    common = {"cpu_model": cpu, "cpu_bf16_flags": bf16, "matmul_peak_gflops": round(peak, 1), "tiny": bool(f.tiny),
              "repeats": f.repeats, "steps": f.steps, "warmup_steps": f.warmup_steps, "calls": f.calls,
              "throughput_batches": f.throughput_batches, "batch_size": f.batch_size,
              "max_seq_length": f.max_seq_length, "vocab_size": vocab, "dtype_policies": " ".join(policies)}
    import keras_hub

    results = dict(
        common, config=config.to_dict(),
        learning_rate=f.learning_rate, seed=f.seed, training_steps=ctx.total_steps,
        versions={"tensorflow": tf.__version__, "keras": keras.__version__, "keras_hub": keras_hub.__version__},
        dataset={"data_dir": f.data_dir, "train_examples": len(ctx.train_examples),
                 "dev_examples": len(ctx.dev_examples),
                 "train_packed_length_median": float(statistics.median(train_lengths.tolist())),
                 "train_packed_length_p95": percentile(train_lengths, 95),
                 "dev_packed_length_median": float(statistics.median(lengths.tolist()))},
        latency_text=short, latency_text_tokens=short_len, rows=rows, ratios=ratios, accuracy=accuracy,
        accuracy_run=accuracy_run_, tokenization_equal_to_albert_tf=tokenization,
        initial_logits_max_abs_diff=logits_diff,
        systems={s.name: s.info for s in systems}, skipped=skipped)
    atomic.write_json(os.path.join(out, "results.json"), results)
    flat = dict(common, cpu_bf16_flags=" ".join(bf16))
    csv_rows = [dict(flat, **{k: v for k, v in r.items() if k != "runs"}) for r in rows]
    for name, values in ratios.items():
        csv_rows.append(dict(flat, system=f"ratio {name}", **values))
    fields = []
    for row in csv_rows:
        fields.extend(k for k in row if k not in fields)
    with atomic.open_file(os.path.join(out, "results.csv"), "w") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(csv_rows)
    png = plot(rows, os.path.join(out, "finetune_bench.png"),
               f"topic task fine-tuning, {'tiny' if f.tiny else 'albert_base'} config, seq {f.max_seq_length}, batch "
               f"{f.batch_size}, {'/'.join(policies)}; {cpu}; medians of {f.repeats} rounds", accuracy_run_)
    print(f"wrote {out}/results.json, results.csv and {os.path.basename(png)}")
    return 0


main, entry = entry_points.command("finetune_bench", define_flags, run)


if __name__ == "__main__":
    entry()
