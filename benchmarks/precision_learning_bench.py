"""bf16 against float32 learning: every task trained at both policies from the same start.

    python benchmarks/precision_learning_bench.py [--tasks=squad_v1,squad_v2,race,classification,pretraining] \\
        [--starts=random,pretrained] [--seeds=3] [--output_dir=results/precision_learning] [--classifier_steps=400]
    python benchmarks/precision_learning_bench.py --tiny      # smoke test: tiny data, 1 seed, short runs

Each run is the task's own entry point in its own process with the release's flags, at
mixed_bfloat16 and at float32 for each seed, from the same start; data is made here once into
--output_dir/data (nothing downloaded). Finished runs are kept and not redone; --output_dir
remembers its settings and refuses other ones. Writes results.json (with the machine record) and
results.csv. The data, model, budgets and the "same learning" verdict: benchmarks/README.md.
"""

import importlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
if ROOT not in sys.path:  # run as a script: this checkout's albert_tf
    sys.path.insert(0, ROOT)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_harness as harness  # noqa: E402  (the standard library only)

from albert_tf import entry_points  # noqa: E402  (light: albert_tf.cli is imported when main runs)

TASKS = ("squad_v1", "squad_v2", "race", "classification", "pretraining")
STARTS = ("random", "pretrained")
POLICIES = ("float32", "mixed_bfloat16")
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")
MODEL = {"hidden_size": 128, "num_hidden_layers": 2, "num_hidden_groups": 1, "embedding_size": 32,
         "num_attention_heads": 2, "intermediate_size": 256, "hidden_dropout_prob": 0.1,
         "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128}
# the budget of each task: realistic (default) and --tiny
SETTINGS = {
    False: {"corpus_mb": 4.0, "vocab_size": 8000, "squad_train": 3600, "squad_dev": 600, "squad_epochs": 10,
            "race_articles": 120, "race_steps": 600, "classifier_steps": 400, "pretrain_steps": 600},
    True: {"corpus_mb": 0.6, "vocab_size": 1500, "squad_train": 160, "squad_dev": 40, "squad_epochs": 1,
           "race_articles": 4, "race_steps": 10, "classifier_steps": 10, "pretrain_steps": 10},
}
METRIC = {"squad_v1": ("f1", 1.0), "squad_v2": ("f1", 1.0), "race": ("accuracy", 100.0),
          "classification": ("accuracy", 100.0), "pretraining": ("loss", 1.0)}


def define_flags(flag_values):
    from absl import flags

    flags.DEFINE_list("tasks", list(TASKS), f"Tasks: {', '.join(TASKS)}; TASK:START runs one start only "
                      "(e.g. squad_v1:random).", flag_values=flag_values)
    flags.DEFINE_list("starts", list(STARTS), "random, pretrained (pretraining always starts from random).",
                      flag_values=flag_values)
    flags.DEFINE_integer("seeds", 3, "Seeds per task, start and policy.", flag_values=flag_values)
    flags.DEFINE_float("leave_factor", 1.25, "Leaving the plateau: training loss <= this x float32's mean final loss.",
                       flag_values=flag_values)
    flags.DEFINE_string("output_dir", "results/precision_learning", "Where data, runs and results go.",
                        flag_values=flag_values)
    flags.DEFINE_bool("tiny", False, "Smoke test: tiny data, short runs (plumbing only; no verdict is meaningful).",
                      flag_values=flag_values)
    flags.DEFINE_integer("classifier_steps", None, "Classification budget in steps (default: 400, --tiny 10); "
                         "another budget is another --output_dir.", flag_values=flag_values)


def plan_of(tasks, starts):
    """[(task, start)] to run: each of `tasks` ("squad_v1", or "squad_v1:random" for one
    start) with each of `starts`; pretraining from random weights only."""
    plan = []
    for item in tasks:
        task, _, start = item.partition(":")
        for s in ([start] if start else starts):
            if (task, s) not in plan and not (task == "pretraining" and s != "random"):
                plan.append((task, s))
    return plan


def check_flags(f):
    for name, values, allowed in (("tasks", [t.partition(":")[0] for t in f.tasks], TASKS),
                                  ("starts", f.starts + [t.partition(":")[2] for t in f.tasks if ":" in t], STARTS)):
        bad = [x for x in values if x not in allowed]
        if bad or not values:
            raise ValueError(f"--{name}: {', '.join(bad) or 'empty'} not among {', '.join(allowed)}.")
    if f.classifier_steps is not None and f.classifier_steps < 10:
        raise ValueError(f"--classifier_steps must be at least 10 (got {f.classifier_steps}).")
    if f.seeds < 1 or f.leave_factor <= 1.0:
        raise ValueError(f"need --seeds >= 1 and --leave_factor > 1 (got {f.seeds}, {f.leave_factor}).")


def _tool(name):
    """tools/NAME.py, the module tools.NAME (the repository's root is on sys.path: __main__ below)."""
    return importlib.import_module(f"tools.{name}")


def make_data(data_dir, s, plan):
    """Makes (once) every input the runs of `plan` read; returns their paths."""
    from albert_tf.data.instances import InstanceOptions
    from albert_tf.data.sample_corpus import fixed_corpus_bytes, write_corpus
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
    from albert_tf.data.writer import WriterOptions, write_pretraining_data

    os.makedirs(data_dir, exist_ok=True)
    p = {"corpus": os.path.join(data_dir, "corpus.txt"), "spm": os.path.join(data_dir, "spm.model"),
         "config": os.path.join(data_dir, "albert_config.json"), "race": os.path.join(data_dir, "race"),
         "records": [os.path.join(data_dir, f"pretrain-{i}.tfrecord") for i in range(2)]}
    if not os.path.exists(p["spm"]):
        fixed = fixed_corpus_bytes() >= int(s["corpus_mb"] * 1_000_000)  # else this interpreter's docstrings
        write_corpus(p["corpus"], s["corpus_mb"], "fixed" if fixed else "installed")
        train_sentencepiece([p["corpus"]], p["spm"][: -len(".model")], SentencePieceOptions(vocab_size=s["vocab_size"]))
    with open(os.path.join(ROOT, "configs", "albert_tiny.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(MODEL, vocab_size=s["vocab_size"])
    with open(p["config"], "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    squad = _tool("make_squad_data")
    for version in ("1.1", "2.0"):
        for split, count, seed in (("train", s["squad_train"], 7), ("dev", s["squad_dev"], 8)):
            path = p[f"squad_{version}_{split}"] = os.path.join(data_dir, f"{split}-v{version}.json")
            if not os.path.exists(path):
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(squad.make_people_dataset(version, count, seed, 500, split), f)
    if not os.path.exists(p["race"]):
        _tool("make_race_data").make_race(p["race"], num_articles=s["race_articles"], seed=3, layout="files")
    needs_records = any(task == "pretraining" or start == "pretrained" for task, start in plan)
    if needs_records and not os.path.exists(p["records"][1]):
        write_pretraining_data([p["corpus"]], p["records"], p["spm"],
                               WriterOptions(InstanceOptions(max_seq_length=128), dupe_factor=2), progress_stream=None)
    return p


def run_flags(task, p, s, start, policy, seed, out):
    """The entry point and flags of one run."""
    common = [f"--output_dir={out}", f"--albert_config_file={p['config']}", f"--dtype_policy={policy}",
              f"--random_seed={seed}"]
    init = [f"--init_checkpoint={p['pretrained']}"] if start == "pretrained" else []
    if task.startswith("squad"):
        version = "1.1" if task == "squad_v1" else "2.0"
        return f"albert_tf.run_{task}", common + init + [
            f"--spm_model_file={p['spm']}", f"--train_file={p[f'squad_{version}_train']}",
            f"--predict_file={p[f'squad_{version}_dev']}", "--do_train", "--do_predict", "--max_seq_length=128",
            "--doc_stride=48", "--max_query_length=24", "--train_batch_size=32",
            f"--learning_rate={2e-3 if start == 'random' else 5e-4}", f"--num_train_epochs={s['squad_epochs']}",
            "--iterations_per_loop=100", "--save_checkpoints_steps=100000"]
    if task == "race":
        return "albert_tf.run_race", common + init + [
            f"--data_dir={p['race']}", f"--spm_model_file={p['spm']}", "--do_train", "--do_eval",
            "--max_seq_length=128", "--max_qa_length=32", "--train_batch_size=16", "--eval_batch_size=32",
            f"--learning_rate={1e-3 if start == 'random' else 5e-4}", f"--train_step={s['race_steps']}",
            f"--warmup_step={s['race_steps'] // 10}", f"--save_checkpoints_steps={s['race_steps']}",
            "--iterations_per_loop=50"]
    if task == "classification":
        return "albert_tf.run_classifier", common + init + [
            "--task_name=tsv", f"--data_dir={TOPICS}", f"--spm_model_file={p['spm']}", "--text_a_column=sentence",
            "--labels=concurrency,networking,numbers,text", "--do_train", "--do_eval", "--max_seq_length=64",
            "--train_batch_size=32", "--eval_batch_size=64", f"--learning_rate={1e-3 if start == 'random' else 5e-4}",
            f"--train_step={s['classifier_steps']}", f"--warmup_step={s['classifier_steps'] // 10}",
            f"--save_checkpoints_steps={s['classifier_steps']}", "--iterations_per_loop=50"]
    return "albert_tf.run_pretraining", common + [
        f"--input_file={p['records'][0]}", f"--eval_input_file={p['records'][1]}", "--max_seq_length=128",
        "--train_batch_size=32", "--eval_batch_size=64", "--learning_rate=2e-3", "--optimizer=lamb",
        f"--num_train_steps={s['pretrain_steps']}", f"--num_warmup_steps={s['pretrain_steps'] // 10}",
        f"--save_checkpoints_steps={s['pretrain_steps']}", "--iterations_per_loop=50", "--max_eval_steps=20",
        "--shuffle_buffer_size=1000"]


def execute(module, args, out, log):
    """Runs one entry point unless `out` already holds its results; returns its results dict."""
    done = os.path.join(out, "eval_results.json")
    if not os.path.exists(done):
        started = time.time()
        with open(log, "w", encoding="utf-8") as f:
            code = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).returncode
        if code != 0:
            raise RuntimeError(f"{module} exited {code}; see {log}")
        with open(os.path.join(out, "seconds.txt"), "w", encoding="utf-8") as f:
            f.write(f"{time.time() - started:.1f}\n")
    with open(done, encoding="utf-8") as f:
        results = json.load(f)
    curve = []
    with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("split") == "train":
                curve.append((record["step"], record["loss"]))
    with open(os.path.join(out, "seconds.txt"), encoding="utf-8") as f:
        seconds = float(f.read())
    return results, curve, seconds


def metric_of(task, results):
    """(main metric, extra) of a run's eval_results.json, in points (accuracies x 100)."""
    name, scale = METRIC[task]
    value = results.get(name, results.get(f"eval_{name}"))
    extra = {"masked_lm_accuracy": results.get("masked_lm_accuracy")} if task == "pretraining" else {}
    if task == "squad_v2":
        extra = {"best_f1": results.get("best_f1")}
    return float(value) * scale, extra


def summarize(task, runs, leave_factor):
    """The verdict of one task and start from its runs {policy: [run record]}."""
    f32_final = statistics.mean(r["curve"][-1][1] for r in runs["float32"])
    threshold = leave_factor * f32_final
    for records in runs.values():
        for r in records:
            r["left_plateau_at"] = next((step for step, loss in r["curve"] if loss <= threshold), None)
    summary = {"leave_threshold_loss": threshold}
    for policy, records in runs.items():
        values = [r["metric"] for r in records]
        summary[policy] = {"metric": values, "mean": statistics.mean(values),
                           "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                           "spread": max(values) - min(values),
                           "left_plateau_at": [r["left_plateau_at"] for r in records],
                           "seconds": [r["seconds"] for r in records]}
    f32, bf16 = summary["float32"], summary["mixed_bfloat16"]
    stuck = (all(s is not None for s in f32["left_plateau_at"])
             and any(s is None for s in bf16["left_plateau_at"]))
    allowed = (0.01 * abs(f32["mean"]) if task == "pretraining" else 2.0)
    allowed = max(allowed, f32["spread"])
    difference = bf16["mean"] - f32["mean"]
    summary.update(metric=METRIC[task][0], difference=difference, allowed_difference=allowed,
                   bf16_seed_stuck=stuck, same_learning=(not stuck and abs(difference) <= allowed))
    return summary


def run(f):
    check_flags(f)
    from albert_tf.storage import atomic

    s = dict(SETTINGS[f.tiny])
    if f.classifier_steps is not None:
        s["classifier_steps"] = f.classifier_steps
    os.makedirs(f.output_dir, exist_ok=True)
    settings_file = os.path.join(f.output_dir, "settings.json")
    if os.path.exists(settings_file):
        with open(settings_file, encoding="utf-8") as fh:
            if json.load(fh) != s:
                raise ValueError(f"--output_dir {f.output_dir} holds runs with other settings ({settings_file}); "
                                 "choose another --output_dir.")
    atomic.write_json(settings_file, s)
    from albert_tf.training.precision import choose

    native = choose("auto")
    print(f"hardware: {native.hardware}; auto would pick {native.policy}", flush=True)
    plan = plan_of(f.tasks, f.starts)
    p = make_data(os.path.join(f.output_dir, "data"), s, plan)
    if any(start == "pretrained" for _, start in plan):
        p["pretrained"] = os.path.join(f.output_dir, "pretrained")
        module, args = run_flags("pretraining", p, s, "random", "float32", 1, p["pretrained"])
        print("pretrained start: run_pretraining float32 ...", flush=True)
        execute(module, args, p["pretrained"], p["pretrained"] + ".log")
    os.makedirs(os.path.join(f.output_dir, "runs"), exist_ok=True)
    total, done, ran, ran_seconds = len(plan) * len(POLICIES) * f.seeds, 0, 0, 0.0
    table = {}
    for task, start in plan:
        runs = {policy: [] for policy in POLICIES}
        for seed in range(1, f.seeds + 1):
            for policy in POLICIES:  # interleaved: a drift in the machine hits both
                out = os.path.join(f.output_dir, "runs", f"{task}-{start}-{policy}-seed{seed}")
                module, args = run_flags(task, p, s, start, policy, seed, out)
                cached = os.path.exists(os.path.join(out, "eval_results.json"))
                began = time.time()
                results, curve, seconds = execute(module, args, out, out + ".log")
                if not cached:
                    ran, ran_seconds = ran + 1, ran_seconds + time.time() - began
                metric, extra = metric_of(task, results)
                runs[policy].append({"seed": seed, "metric": metric, **extra, "curve": curve, "seconds": seconds})
                done += 1
                eta = ("(kept from an earlier run)" if cached
                       else f"ETA {ran_seconds / ran * (total - done) / 60:.0f} min")
                print(f"[{done}/{total}] {task} {start} {policy} seed {seed}: {METRIC[task][0]} {metric:.2f} "
                      f"({seconds:.0f} s)  {eta}", flush=True)
        summary = summarize(task, runs, f.leave_factor)
        table[f"{task}/{start}"] = {"runs": runs, "summary": summary}
        print(f"== {task} from {start}: {summary['metric']} float32 {summary['float32']['mean']:.2f} "
              f"(spread {summary['float32']['spread']:.2f}), bf16 {summary['mixed_bfloat16']['mean']:.2f}; "
              f"left the plateau at f32 {summary['float32']['left_plateau_at']} bf16 "
              f"{summary['mixed_bfloat16']['left_plateau_at']}; same learning: {summary['same_learning']}", flush=True)
    # tasks measured by earlier invocations into this --output_dir (same settings) stay in the
    # table, each with its own runs and seeds; this invocation's replace theirs
    results_file = os.path.join(f.output_dir, "results.json")
    if os.path.exists(results_file):
        with open(results_file, encoding="utf-8") as fh:
            earlier = json.load(fh)
        if earlier.get("settings") == s and earlier.get("hardware") == native.hardware:
            table = {**{k: v for k, v in earlier.get("table", {}).items() if k not in table}, **table}
    seeds = {key: len(entry["runs"]["float32"]) for key, entry in table.items()}
    atomic.write_json(results_file, {"hardware": native.hardware, "machine": harness.machine(), "settings": s,
                                     "model": MODEL, "seeds": seeds, "table": table})
    atomic.write_csv(os.path.join(f.output_dir, "results.csv"), [
        {"task/start": key, "policy": policy, "seed": r["seed"], "metric": round(r["metric"], 4),
         "left_plateau_at": r["left_plateau_at"], "seconds": round(r["seconds"], 1)}
        for key, entry in table.items() for policy in POLICIES for r in entry["runs"][policy]])
    print(f"wrote {f.output_dir}/results.json and results.csv", flush=True)
    return 0


main, entry = entry_points.command("precision_learning_bench", define_flags, run)


if __name__ == "__main__":
    entry()
