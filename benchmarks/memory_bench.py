"""Peak memory and step time of one pretraining step: albert_tf with and without --remat
against keras-hub's AlbertMaskedLM and Hugging Face's AlbertForPreTraining.

    python benchmarks/memory_bench.py [--sizes=base,large,xxlarge] [--seqs=128,512] \
        [--batches=1,2,4,8] [--systems=albert_tf,albert_tf_remat,keras_hub,hf,hf_checkpointing] \
        [--policies=float32,auto] [--steps=2] [--rounds=1] [--budget_gb=16] [--cap_gb=...] \
        [--output_dir=results/memory]

Each cell (system x size x T x micro-batch B x policy) runs in a fresh process (this file with
`--cell=JSON`: a warm-up step, then --steps timed ones), killed and recorded as "does not fit"
past --cap_gb (default 90% of the memory available at the start). Per row (bytes, from
/proc/self/status and TensorFlow's allocator): `training_memory`, `peak_over_baseline`,
`activation_memory`, `tensor_activation_memory`. Writes results.json (with the machine record)
and results.csv. The systems, the batch and each figure: benchmarks/README.md.
"""

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bench_harness as harness  # noqa: E402  (puts this checkout's albert_tf on sys.path unless PYTHONPATH names one)

ROOT = harness.ROOT

from albert_tf import entry_points  # noqa: E402  (light: albert_tf.cli is imported when main runs)

PEERS_PYTHON = os.path.join(HERE, ".peers-venv", "bin", "python")
SYSTEMS = {  # name -> (cell system, remat)
    "albert_tf": ("albert_tf", False), "albert_tf_remat": ("albert_tf", True),
    "keras_hub": ("keras_hub", False), "hf": ("hf", False), "hf_checkpointing": ("hf", True),
}
SIZES = ("tiny", "base", "large", "xlarge", "xxlarge")
GLOBAL_BATCH = 4096  # the paper's
GB = 1024 ** 3


def define_flags(flag_values):
    from absl import flags

    fv = {"flag_values": flag_values}
    flags.DEFINE_list("sizes", ["base", "large", "xxlarge"], f"ALBERT sizes: {', '.join(SIZES)}.", **fv)
    flags.DEFINE_list("seqs", ["128", "512"], "Sequence lengths T.", **fv)
    flags.DEFINE_list("batches", ["1", "2", "4", "8"], "Micro-batches B (one device, one slice).", **fv)
    flags.DEFINE_list("systems", list(SYSTEMS), f"Systems, of {', '.join(SYSTEMS)}.", **fv)
    flags.DEFINE_list("policies", ["float32", "auto"], "float32, mixed_bfloat16 or auto (this machine's choice).",
                      **fv)
    flags.DEFINE_integer("steps", 2, "Timed steps per cell and round (after one warm-up step).", **fv)
    flags.DEFINE_integer("rounds", 1, "Interleaved rounds (5 or more for the step-time target).", **fv)
    flags.DEFINE_float("budget_gb", 16.0, "A device's memory: the largest micro-batch whose training memory fits.",
                       **fv)
    flags.DEFINE_float("cap_gb", None, "Kill a cell above this resident memory (default: 90% of MemAvailable).", **fv)
    flags.DEFINE_integer("cell_timeout", 3600, "Seconds before a cell is stopped.", **fv)
    flags.DEFINE_string("output_dir", "results/memory", "Where results go.", **fv)


# --- one cell, in its own process -------------------------------------------------------------------------


def _status(key, pid="self"):
    """/proc/PID/status's `key` (VmRSS: resident now, VmHWM: its high-water mark) in bytes; 0 when gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak():
    """Sets the high-water mark to the current resident size (Linux clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def predictions_for(seq):
    """Masked positions per sequence: 15% of T, at least the release's 20."""
    return max(20, int(round(0.15 * seq)))


def albert_dims(size):
    """The preset's dims as plain values (hf builds its own config from them), dropout 0."""
    hidden, layers, heads, intermediate, embedding = {
        "tiny": (32, 2, 2, 64, 16), "base": (768, 12, 12, 3072, 128), "large": (1024, 24, 16, 4096, 128),
        "xlarge": (2048, 24, 16, 8192, 128), "xxlarge": (4096, 12, 64, 16384, 128)}[size]
    return dict(vocab_size=30000, embedding_size=embedding, hidden_size=hidden, num_hidden_layers=layers,
                num_attention_heads=heads, intermediate_size=intermediate, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)


def cell_batch(cell):
    return harness.pretraining_batch(30000, cell["batch"], cell["seq"], predictions_for(cell["seq"]))


def albert_config(cell):
    from albert_tf.modeling.config import AlbertConfig

    return AlbertConfig.from_preset(f"albert_{cell['size']}").replace(**albert_dims(cell["size"]))


def _albert_tf(cell):
    """-> (parameters, step()) for albert_tf's driver step."""
    import tensorflow as tf

    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    config = albert_config(cell)
    task = PretrainingTask(PretrainingOptions(config, [], max_seq_length=cell["seq"],
                                              max_predictions_per_seq=predictions_for(cell["seq"]),
                                              global_batch_size=cell["batch"]))
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=cell["batch"], optimizer="lamb",
                                            learning_rate=1e-4, num_train_steps=10**6, dtype_policy=cell["policy"],
                                            remat=cell["remat"]))
    iterator = iter(tf.data.Dataset.from_tensors(cell_batch(cell)).repeat())
    parameters = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
    return parameters, lambda: trainer.train(iterator, 1)


def _albert_tf_finetune(cell):
    """-> (parameters, step()) for a classifier's step: AdamW, dropout 0.1, padding skipped."""
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertEncoder
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.losses import classifier_nll

    config = albert_config(cell).replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertEncoder(config, name="encoder"), 2)
    model.configure_runtime(skip_padding=True, replica_index=lambda: 0)
    optimizer = keras.optimizers.AdamW(1e-5)
    b, lengths = cell_batch(cell), np.random.default_rng(0).integers(cell["seq"] // 4, cell["seq"] + 1, cell["batch"])
    b["input_mask"] = (np.arange(cell["seq"])[None] < lengths[..., None]).astype("int32")
    inputs = {k: b[k] * b["input_mask"] for k in ("input_word_ids", "input_mask", "input_type_ids")}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(classifier_nll(model(inputs, training=True), b["next_sentence_labels"][:, 0]))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return sum(int(np.prod(v.shape)) for v in model.trainable_variables), lambda: step().numpy()


def _keras_hub(cell):
    """-> (parameters, step()) for keras-hub's AlbertMaskedLM train_on_batch."""
    import keras
    import numpy as np

    if cell["remat"]:
        raise ValueError("keras-hub's AlbertMaskedLM has no rematerialization option")
    model = harness.keras_hub_masked_lm(albert_config(cell), cell["policy"])
    model.compile(optimizer=keras.optimizers.Lamb(learning_rate=1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.optimizer.build(model.trainable_variables)
    b = cell_batch(cell)
    x = harness.keras_hub_inputs(b)
    parameters = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    return parameters, lambda: model.train_on_batch(x, b["masked_lm_ids"], sample_weight=b["masked_lm_weights"])


def _hf(cell):
    """-> (parameters, step()) for transformers' AlbertForPreTraining with AdamW."""
    import contextlib
    import importlib

    torch = importlib.import_module("torch")  # the peers' environment's, never albert_tf's dependencies
    transformers = importlib.import_module("transformers")

    config = transformers.AlbertConfig(**albert_dims(cell["size"]), hidden_act="gelu_new",
                                       max_position_embeddings=512, type_vocab_size=2)
    model = transformers.AlbertForPreTraining(config)
    model.train()
    if cell["remat"]:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ValueError(f"transformers {transformers.__version__}: AlbertForPreTraining does not support "
                             "gradient checkpointing")
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for p in model.parameters():  # the slots exist before the baseline, as in the other systems
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    b = {k: torch.as_tensor(v).long() for k, v in cell_batch(cell).items() if k != "masked_lm_weights"}
    labels = torch.full((cell["batch"], cell["seq"]), -100, dtype=torch.long)
    labels.scatter_(1, b["masked_lm_positions"], b["masked_lm_ids"])
    inputs = {"input_ids": b["input_word_ids"], "attention_mask": b["input_mask"],
              "token_type_ids": b["input_type_ids"], "labels": labels,
              "sentence_order_label": b["next_sentence_labels"][:, 0]}
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if cell["policy"] == "mixed_bfloat16"
                else contextlib.nullcontext())

    def step():
        with autocast:
            loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return sum(p.numel() for p in model.parameters() if p.requires_grad), step


def tensor_memory(device, reset=False):
    """TensorFlow's allocator on `device`: (bytes of live tensors now, their peak since the last
    reset), or None where it keeps no statistics (oneDNN off: the plain C allocator)."""
    import tensorflow as tf

    try:
        if reset:
            tf.config.experimental.reset_memory_stats(device)
        info = tf.config.experimental.get_memory_info(device)
    except ValueError:  # "Allocator stats not available" (TF_ENABLE_ONEDNN_OPTS=0)
        return None
    return info["current"], info["peak"]


def cell_record(cell):
    """Builds the cell's system, runs a warm-up step and `steps` timed steps; returns the record."""
    start_rss = _status("VmRSS")
    systems = {"albert_tf": _albert_tf, "albert_tf_finetune": _albert_tf_finetune, "keras_hub": _keras_hub, "hf": _hf}
    parameters, step = systems[cell["system"]](cell)
    baseline = _status("VmRSS")
    started = time.perf_counter()
    step()  # traces / compiles / allocates once
    first = time.perf_counter() - started
    warmup_peak = _status("VmHWM")
    reset_peak()
    device = None
    if "tensorflow" in sys.modules:  # the step's tensors live on the GPU where there is one
        import tensorflow as tf

        device = "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"
    tensors_before = None if device is None else tensor_memory(device, reset=True)
    times = []
    for _ in range(cell["steps"]):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    record = dict(cell, parameters=parameters, rss_after_imports=start_rss, baseline_rss=baseline,
                  warmup_peak_rss=warmup_peak, peak_rss=_status("VmHWM"), first_step_seconds=first,
                  step_seconds=times)
    if tensors_before is not None:  # live tensors between steps (weights, slots) and the steps' peak
        record.update(tensor_device=device, tensor_baseline=tensors_before[0], tensor_peak=tensor_memory(device)[1])
    return record


def cell_main(text):
    """The cell process: imports the framework (not the cell's memory), prints the record."""
    import importlib

    cell = json.loads(text)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in ("torch", "transformers") if cell["system"] == "hf" else ("tensorflow", "keras"):
        importlib.import_module(name)
    try:
        record = cell_record(cell)
    except ValueError as e:  # a setting the system does not have
        record = dict(cell, unsupported=str(e))
    print("MEMORY_CELL " + json.dumps(record), flush=True)


# --- the benchmark --------------------------------------------------------------------------------------


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable in /proc/meminfo")


def run_cell(cell, cap_bytes, timeout, python=sys.executable):
    """Runs one cell in a fresh process under the memory cap; returns its record (with
    "does_not_fit" or "error" where it did not finish)."""
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--cell", json.dumps(cell)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT))
    killed = {"over_cap": 0}

    def watch():
        while proc.poll() is None:
            used = _status("VmRSS", proc.pid)
            if used > cap_bytes:
                killed["over_cap"] = used
                proc.kill()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        return dict(cell, error=f"stopped after {timeout} s")
    watcher.join()
    if killed["over_cap"]:
        return dict(cell, does_not_fit=f"resident memory passed the cap of {cap_bytes / GB:.1f} GB")
    lines = [line for line in stdout.splitlines() if line.startswith("MEMORY_CELL ")]
    if proc.returncode != 0 or not lines:
        if proc.returncode in (-9, 137) or "MemoryError" in stderr or "bad_alloc" in stderr:
            return dict(cell, does_not_fit=f"killed (exit {proc.returncode}): out of memory")
        return dict(cell, error=f"exit {proc.returncode}: {stderr.strip().splitlines()[-1:] or ['']}"[:500])
    return json.loads(lines[-1][len("MEMORY_CELL "):])


def measured(record):
    return "peak_rss" in record


def summarize_cell(records):
    """The rounds of one cell -> one row (medians over rounds)."""
    first = records[0]
    keys = ("name", "system", "remat", "size", "seq", "batch", "policy")
    row = {k: first[k] for k in keys}
    done = [r for r in records if measured(r)]
    if not done:
        row["status"] = next((r.get("unsupported") or r.get("does_not_fit") or r.get("error") for r in records), "")
        row["fits_machine"] = not any("does_not_fit" in r for r in records) and not any("error" in r for r in records)
        return row
    parameters = done[0]["parameters"]
    gradients = 4 * parameters
    training = statistics.median(r["peak_rss"] - r["rss_after_imports"] for r in done)
    over = statistics.median(r["peak_rss"] - r["baseline_rss"] for r in done)
    step = statistics.median(statistics.median(r["step_seconds"]) for r in done)
    row.update(status="measured", fits_machine=True, rounds=len(done), parameters=parameters,
               training_memory=int(training), peak_over_baseline=int(over),
               activation_memory=int(max(over - gradients, 0)),
               model_and_slots=int(statistics.median(r["baseline_rss"] - r["rss_after_imports"] for r in done)),
               step_seconds=round(step, 4), step_seconds_by_round=[round(statistics.median(r["step_seconds"]), 4)
                                                                     for r in done])
    if all("tensor_peak" in r for r in done):  # TensorFlow's allocator (not the hf cells)
        row["tensor_device"] = done[0]["tensor_device"]
        row["tensor_activation_memory"] = int(max(statistics.median(r["tensor_peak"] - r["tensor_baseline"]
                                                                    for r in done) - gradients, 0))
    return row


def setting_of(row):
    return (row["name"], row["size"], row["seq"], row["policy"])


def largest_batch_within(rows, budget_bytes):
    """setting -> the largest measured micro-batch whose training memory fits the budget (0: none)."""
    best = {}
    for row in rows:
        if row["status"] != "measured":
            continue
        key = setting_of(row)
        best.setdefault(key, 0)
        if row["training_memory"] <= budget_bytes:
            best[key] = max(best[key], row["batch"])
    return best


def per_example_activation(rows):
    """(name, size, seq, policy) -> (static bytes, activation bytes per example), fitted by least
    squares over the measured micro-batches (static: training memory at B = 0)."""
    groups = {}
    for row in rows:
        if row["status"] == "measured":
            groups.setdefault(setting_of(row), []).append((row["batch"], row["training_memory"]))
    fits = {}
    for key, points in groups.items():
        if len(points) == 1:
            (b, m), = points
            fits[key] = (None, m / b)
            continue
        n = len(points)
        mean_b = sum(b for b, _ in points) / n
        mean_m = sum(m for _, m in points) / n
        slope = sum((b - mean_b) * (m - mean_m) for b, m in points) / sum((b - mean_b) ** 2 for b, _ in points)
        fits[key] = (mean_m - slope * mean_b, slope)
    return fits


def accumulation_plan(static_bytes, per_example_bytes, device_bytes, global_batch=GLOBAL_BATCH):
    """An estimate: the largest power-of-two micro-batch that fits a device of `device_bytes`
    with `static_bytes` taken, and the K that reaches `global_batch` on one device."""
    if per_example_bytes <= 0 or static_bytes >= device_bytes:
        return None
    fit = int((device_bytes - static_bytes) // per_example_bytes)
    if fit < 1:
        return None
    micro = 2 ** int(math.log2(min(fit, global_batch)))
    return {"micro_batch": micro, "accumulation_steps": math.ceil(global_batch / micro)}


def targets(rows):
    """The --remat targets wherever their cells were measured: xxlarge at T 512, per B and policy."""
    by = {(r["name"], r["size"], r["seq"], r["batch"], r["policy"]): r for r in rows}
    out = []
    for (name, size, seq, batch, policy), remat in sorted(by.items()):
        if name != "albert_tf_remat" or size != "xxlarge" or seq != 512 or remat["status"] != "measured":
            continue
        plain = by.get(("albert_tf", size, seq, batch, policy))
        entry = {"size": size, "seq": seq, "batch": batch, "policy": policy,
                 "remat_activation_memory": remat["activation_memory"]}
        if plain and plain["status"] == "measured":
            entry["activation_ratio"] = round(remat["activation_memory"] / plain["activation_memory"], 3)
            entry["activation_target_met"] = entry["activation_ratio"] <= 1 / 3
            if remat.get("tensor_activation_memory") and plain.get("tensor_activation_memory"):
                entry["tensor_activation_ratio"] = round(remat["tensor_activation_memory"]
                                                         / plain["tensor_activation_memory"], 3)
                entry["tensor_activation_target_met"] = entry["tensor_activation_ratio"] <= 1 / 3
            entry["step_time_ratio"] = round(remat["step_seconds"] / plain["step_seconds"], 3)
            entry["step_time_target_met"] = entry["step_time_ratio"] <= 1.4
        elif plain:
            entry["plain"] = plain["status"]
        for peer in ("keras_hub", "hf", "hf_checkpointing"):
            row = by.get((peer, size, seq, batch, policy))
            if row is None:
                continue
            if row["status"] == "measured":
                entry[f"{peer}_activation_memory"] = row["activation_memory"]
                entry[f"less_than_{peer}"] = remat["activation_memory"] < row["activation_memory"]
            else:
                entry[f"{peer}"] = row["status"]
        out.append(entry)
    return out


def plan_cells(sizes, seqs, policies, systems, batches, steps):
    """Every cell, a setting's micro-batches in increasing order."""
    cells = []
    for size in sizes:
        for seq in seqs:
            for policy in policies:
                for name in systems:
                    system, remat = SYSTEMS[name]
                    for batch in sorted(batches):
                        cells.append({"name": name, "system": system, "remat": remat, "size": size, "seq": seq,
                                      "batch": batch, "policy": policy, "steps": steps})
    return cells


def run_rounds(cells, rounds, cap_bytes, timeout, runner=run_cell, stream=None):
    """Runs every cell `rounds` times, round by round; a setting whose micro-batch did not fit
    (or that a system does not have) is not tried at larger micro-batches (or again).
    Returns {cell index: [records]}."""
    records = {i: [] for i in range(len(cells))}
    refused = {}  # setting -> (smallest micro-batch that did not fit, why) or (0, unsupported reason)
    started, count, total = time.time(), 0, len(cells) * rounds
    for round_ in range(rounds):
        for i, cell in enumerate(cells):
            setting = (cell["name"], cell["size"], cell["seq"], cell["policy"])
            if setting in refused and cell["batch"] >= refused[setting][0]:
                batch, why = refused[setting]
                record = dict(cell, unsupported=why) if batch == 0 else dict(
                    cell, does_not_fit=f"not tried: B={batch} of this setting did not fit ({why})")
            elif cell["system"] == "hf" and not os.path.exists(PEERS_PYTHON):
                record = dict(cell, unsupported="no benchmarks/.peers-venv (bash benchmarks/make_peers_venv.sh)")
            else:
                python = PEERS_PYTHON if cell["system"] == "hf" else sys.executable
                record = runner({k: cell[k] for k in ("system", "remat", "size", "seq", "batch", "policy", "steps")},
                                cap_bytes, timeout, python)
                if "does_not_fit" in record:
                    refused[setting] = (cell["batch"], record["does_not_fit"])
                elif "unsupported" in record:
                    refused[setting] = (0, record["unsupported"])
            record["name"] = cell["name"]
            records[i].append(record)
            count += 1
            elapsed = time.time() - started
            if measured(record):
                what = (f"{(record['peak_rss'] - record['rss_after_imports']) / GB:.2f} GB, "
                        f"{statistics.median(record['step_seconds']):.3f} s/step")
            else:
                what = record.get("does_not_fit") or record.get("unsupported") or record.get("error")
            print(f"[{count}/{total}] round {round_ + 1} {cell['name']} {cell['size']} T{cell['seq']} B{cell['batch']} "
                  f"{cell['policy']}: {what}  ({elapsed:.0f} s, ETA {elapsed / count * (total - count):.0f} s)",
                  file=stream, flush=True)
    return records




def run(f):
    """The benchmark with the parsed flags `f` (ValueError for a bad one, before any cell runs)."""
    from albert_tf.training.precision import choose

    unknown = [s for s in f.systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"--systems: unknown {', '.join(unknown)}; expected some of {', '.join(SYSTEMS)}")
    bad_sizes = [s for s in f.sizes if s not in SIZES]
    if bad_sizes:
        raise ValueError(f"--sizes: unknown {', '.join(bad_sizes)}; expected {', '.join(SIZES)}")
    try:
        seqs, batches = [int(s) for s in f.seqs], [int(b) for b in f.batches]
    except ValueError as e:
        raise ValueError(f"--seqs and --batches take integers: {e}") from None
    if min(seqs + batches) < 1 or max(seqs) > 512:
        raise ValueError("--seqs must be in 1..512 and --batches positive")
    chosen = {}
    for asked in f.policies:
        try:
            precision = choose(asked)
        except ValueError as e:
            raise ValueError(f"--policies: {e}") from None
        chosen.setdefault(precision.policy, f"{asked}: {precision.reason}")
    cap = int(f.cap_gb * GB) if f.cap_gb else int(0.9 * mem_available())
    machine = harness.machine()
    print(f"CPU {machine['cpu_model']} ({machine['cpu_flags']}); cells in fresh processes, each stopped above "
          f"{cap / GB:.1f} GB resident; policies: " + ", ".join(f"{p} ({why})" for p, why in chosen.items()),
          flush=True)

    cells = plan_cells(f.sizes, seqs, list(chosen), f.systems, batches, f.steps)
    records = run_rounds(cells, f.rounds, cap, f.cell_timeout)
    rows = [summarize_cell(records[i]) for i in range(len(cells))]
    budget = int(f.budget_gb * GB)
    for row in rows:
        if row["status"] == "measured":
            row["fits_budget"] = row["training_memory"] <= budget
    largest = largest_batch_within(rows, budget)
    plans = []
    for (name, size, seq, policy), (static, per_example) in sorted(per_example_activation(rows).items()):
        entry = {"name": name, "size": size, "seq": seq, "policy": policy, "estimate": True,
                 "activation_per_example": int(per_example), "static": None if static is None else int(static)}
        if static is not None:
            for device_gb in (16, 80):
                entry[f"plan_{device_gb}gb"] = accumulation_plan(static, per_example, device_gb * GB)
        plans.append(entry)
    goal = targets(rows)

    print(f"\n{'setting':<40} {'B':>3} {'training GB':>11} {'over base GB':>12} {'activ. GB':>9} "
          f"{'tensors GB':>10} {'s/step':>8}")
    for row in rows:
        label = f"{row['name']} {row['size']} T{row['seq']} {row['policy']}"
        if row["status"] == "measured":
            tensors = row.get("tensor_activation_memory")
            print(f"{label:<40} {row['batch']:>3} {row['training_memory'] / GB:>11.2f} "
                  f"{row['peak_over_baseline'] / GB:>12.2f} {row['activation_memory'] / GB:>9.2f} "
                  f"{'' if tensors is None else f'{tensors / GB:.2f}':>10} {row['step_seconds']:>8.3f}")
        else:
            print(f"{label:<40} {row['batch']:>3} {row['status']}")
    print(f"\nlargest micro-batch within {f.budget_gb:g} GB of training memory (of those measured):")
    for (name, size, seq, policy), batch in sorted(largest.items()):
        print(f"  {name} {size} T{seq} {policy}: {batch or 'none'}")
    print("\nestimates from the measured activation memory per example (paper's global batch 4096, one device):")
    for entry in plans:
        print(f"  {entry['name']} {entry['size']} T{entry['seq']} {entry['policy']}: "
              f"{entry['activation_per_example'] / GB:.3f} GB/example; 16 GB: {entry.get('plan_16gb')}; "
              f"80 GB: {entry.get('plan_80gb')}")
    for entry in goal:
        print("target (xxlarge, T 512): " + json.dumps(entry))

    out = harness.output_dir(f.output_dir)
    harness.write_results(out, {
        "machine": machine, "policies": chosen, "cap_bytes": cap, "budget_gb": f.budget_gb, "rounds": f.rounds,
        "steps": f.steps,
        "largest_micro_batch_within_budget": [{"name": k[0], "size": k[1], "seq": k[2], "policy": k[3], "batch": v}
                                              for k, v in sorted(largest.items())],
        "accumulation_estimates": plans, "targets": goal, "cells": [r for i in records for r in records[i]]},
        rows, ["name", "size", "seq", "batch", "policy", "status", "training_memory", "peak_over_baseline",
               "activation_memory", "tensor_activation_memory", "model_and_slots", "parameters", "step_seconds",
               "rounds", "fits_budget"])
    print(f"wrote {out}/results.json and results.csv", flush=True)
    return 0


main, entry = entry_points.command("memory_bench", define_flags, run)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cell"]:
        cell_main(sys.argv[2])
    else:
        entry()
