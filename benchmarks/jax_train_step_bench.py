"""The ALBERT pretraining step on Keras' JAX backend: examples/s, step time and the fraction
of the device's bf16 matmul peak, with keras-hub's AlbertMaskedLM as the peer in the same run.

    KERAS_BACKEND=jax python benchmarks/jax_train_step_bench.py [--cases=albert_base:128,...] \
        [--dtype_policy=mixed_bfloat16] [--remat] [--accumulation=1] [--steps=10] [--peer] \
        [--output_dir=results/bench_jax_train_step]

Runs without TensorFlow: albert_tf's model, pretraining loss, global-norm clipping and LAMB
update in one `jax.jit` step, on synthetic batches; the peer under the same step, loss,
clipping and update. results.jsonl holds each result as it finishes, results.json all of them.
Method (accumulation, the peak, FLOPs) and figures: benchmarks/README.md.
"""

import json
import os
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_harness as harness  # noqa: E402  (the standard library only)

from albert_tf import entry_points  # noqa: E402  (light: albert_tf.cli is imported when main runs)

DEFAULT_CASES = ("albert_base:128,albert_large:128,albert_xxlarge:128,albert_base:512,albert_large:512,"
                 "albert_xxlarge:512")
# examples per step and masked positions per sequence at each length (the release's
# max_predictions_per_seq: 20 at 128; 76 at 512, as 0.15 x 512 rounded as the release's flags)
BATCH = {128: 64, 512: 16}
PREDICTIONS = {128: 20, 512: 76}
TINY_CONFIG = dict(vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=64)


def define_flags(flag_values):
    from absl import flags

    fv = {"flag_values": flag_values}
    flags.DEFINE_string("cases", DEFAULT_CASES, "Comma list of PRESET:SEQ_LENGTH, timed in this order.", **fv)
    flags.DEFINE_enum("dtype_policy", "mixed_bfloat16", ["float32", "mixed_bfloat16"],
                      "Keras dtype policy of both models.", **fv)
    flags.DEFINE_bool("remat", False, "Rematerialize each layer application in the backward pass (albert_tf's "
                      "--remat; the peer runs without).", **fv)
    flags.DEFINE_integer("accumulation", 1, "Gradient accumulation slices per step (--gradient_accumulation_steps).",
                         **fv)
    flags.DEFINE_integer("batch_size", 0, "Examples per step (0: 64 at T 128, 16 at T 512).", **fv)
    flags.DEFINE_integer("steps", 10, "Timed steps per repeat.", **fv)
    flags.DEFINE_integer("repeats", 3, "Timed repeats (the median is reported).", **fv)
    flags.DEFINE_bool("peer", True, "Also time keras-hub's AlbertMaskedLM.", **fv)
    flags.DEFINE_integer("peak_n", 8192, "Matrix size of the matmul peak.", **fv)
    flags.DEFINE_integer("budget_seconds", 0, "Start no further case after this many seconds (0: no limit); the "
                         "cases left are named in results.json.", **fv)
    flags.DEFINE_bool("tiny", False, "A 2-layer H 32 model instead of the presets' sizes (a CPU check).", **fv)
    flags.DEFINE_string("output_dir", "results/bench_jax_train_step", "Where results go.", **fv)


def parse_cases(text):
    """'albert_base:128,...' -> [(preset, seq)]; ValueError naming the bad entry."""
    from albert_tf.modeling.config import PRESETS

    cases = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        name, _, seq = item.partition(":")
        if name not in PRESETS or seq not in ("128", "512"):
            raise ValueError(f"--cases: {item!r} is not PRESET:128 or PRESET:512 (presets: {', '.join(PRESETS)}).")
        cases.append((name, int(seq)))
    if not cases:
        raise ValueError("--cases names no case.")
    return cases


def matmul_peak_tflops(n, dtype, runs=5):
    """Best TFLOP/s of a jitted n x n x n `jnp.dot` in `dtype` on JAX's default device."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32).astype(dtype)
    dot = jax.jit(jnp.dot)
    return harness.best_rate(lambda: dot(a, b).block_until_ready(), 2 * n**3, runs) / 1e12


def albert_tf_model(config, dtype_policy, remat):
    """(model, loss(outputs, batch) -> (loss, terms), inputs(batch) -> model inputs)."""
    from albert_tf.modeling.losses import pretraining_loss, pretraining_terms
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    model = AlbertPretrainer(config, dtype=dtype_policy)
    if remat:
        model.configure_runtime(remat=True)
    keys = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")

    def inputs(batch):
        return {k: batch[k] for k in keys}

    def loss(outputs, batch, weight_total, batch_size):
        terms = pretraining_terms(outputs["mlm_logits"], outputs["sop_logits"], batch["masked_lm_ids"],
                                  batch["masked_lm_weights"], batch["next_sentence_labels"])
        return pretraining_loss(terms, weight_total, batch_size)

    return model, loss, inputs


def keras_hub_model(config, dtype_policy):
    """keras-hub's AlbertMaskedLM of the same sizes (dropout 0, as albert_tf's v2 presets)."""
    from keras import ops

    model = harness.keras_hub_masked_lm(config, dtype_policy)
    inputs = harness.keras_hub_inputs

    def loss(outputs, batch, weight_total, batch_size):
        del batch_size
        logits = ops.cast(outputs, "float32")
        nll = -ops.take_along_axis(ops.log_softmax(logits, axis=-1), batch["masked_lm_ids"][..., None], axis=-1)[..., 0]
        return ops.sum(nll * batch["masked_lm_weights"]) / (weight_total + 1e-5)

    return model, loss, inputs


def make_step(model, loss_fn, inputs_fn, batch_size, accumulation, learning_rate=1e-4, clip_norm=1.0):
    """The jitted step: (state, batch) -> (state, loss); state = (trainable, non-trainable,
    m, v). K slices of the batch (lax.scan) give summed gradients, clipped to `clip_norm`
    (global norm), then one LAMB update of every variable."""
    import jax
    import jax.numpy as jnp

    from albert_tf.modeling.lamb import LambSettings, lamb_update

    settings = LambSettings()
    flags = [settings.flags(v.path) for v in model.trainable_variables]

    def slice_loss(trainable, non_trainable, batch, weight_total):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, inputs_fn(batch), training=True)
        return loss_fn(outputs, batch, weight_total, batch_size), non_trainable

    grad_fn = jax.value_and_grad(slice_loss, has_aux=True)

    def step(state, batch):
        trainable, non_trainable, m, v = state
        weight_total = jnp.sum(batch["masked_lm_weights"])
        if accumulation == 1:
            (loss, non_trainable), grads = grad_fn(trainable, non_trainable, batch, weight_total)
        else:
            slices = jax.tree_util.tree_map(
                lambda x: x.reshape((accumulation, x.shape[0] // accumulation) + x.shape[1:]), batch)

            def body(carry, piece):
                non_trainable, grads, loss = carry
                (piece_loss, non_trainable), piece_grads = grad_fn(trainable, non_trainable, piece, weight_total)
                grads = jax.tree_util.tree_map(jnp.add, grads, piece_grads)
                return (non_trainable, grads, loss + piece_loss), None

            zeros = jax.tree_util.tree_map(jnp.zeros_like, trainable)
            (non_trainable, grads, loss), _ = jax.lax.scan(body, (non_trainable, zeros, jnp.float32(0.0)), slices)
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in grads))
        scale = clip_norm / jnp.maximum(norm, clip_norm)
        new_w, new_m, new_v = [], [], []
        for w, g, m_i, v_i, (decay, adapt) in zip(trainable, grads, m, v, flags, strict=True):
            w2, m2, v2 = lamb_update(w, g * scale.astype(g.dtype), m_i, v_i, learning_rate, settings, decay, adapt)
            new_w.append(w2)
            new_m.append(m2)
            new_v.append(v2)
        return (new_w, non_trainable, new_m, new_v), loss

    return jax.jit(step, donate_argnums=0)


def time_model(name, model, loss_fn, inputs_fn, batch, f, batch_size):
    """Builds, compiles and times one model's step; returns its result row."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import keras

    # builds the weights symbolically (an eager call would compile every op on JAX)
    model({k: keras.Input(v.shape[1:], dtype=str(v.dtype), name=k) for k, v in inputs_fn(batch).items()})
    step = make_step(model, loss_fn, inputs_fn, batch_size, f.accumulation)
    trainable = [jnp.asarray(v.value) for v in model.trainable_variables]
    state = (trainable, [jnp.asarray(v.value) for v in model.non_trainable_variables],
             [jnp.zeros_like(w) for w in trainable], [jnp.zeros_like(w) for w in trainable])
    device_batch = jax.device_put(batch)
    start = time.perf_counter()
    state, loss = step(state, device_batch)
    first_loss = float(loss)
    compile_s = time.perf_counter() - start
    state, loss = step(state, device_batch)
    loss.block_until_ready()
    times = []
    for _ in range(f.repeats):
        start = time.perf_counter()
        for _ in range(f.steps):
            state, loss = step(state, device_batch)
        loss.block_until_ready()
        times.append((time.perf_counter() - start) / f.steps)
    last_loss = float(loss)
    if not (np.isfinite(first_loss) and np.isfinite(last_loss)):
        raise FloatingPointError(f"{name}: the loss is not finite ({first_loss}, {last_loss}).")
    step_s = statistics.median(times)
    return {"model": name, "step_seconds": round(step_s, 5), "runs_step_seconds": [round(t, 5) for t in times],
            "examples_per_second": round(batch_size / step_s, 2), "compile_seconds": round(compile_s, 1),
            "parameters": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
            "loss_first_step": round(first_loss, 4), "loss_last_step": round(last_loss, 4)}


def run(f):
    import keras

    if keras.backend.backend() != "jax":
        raise ValueError(f"set KERAS_BACKEND=jax before starting (Keras runs on {keras.backend.backend()}).")
    import jax

    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.storage import atomic

    if f.accumulation < 1 or f.steps < 1 or f.repeats < 1:
        raise ValueError("--accumulation, --steps and --repeats must be at least 1.")
    cases = parse_cases(f.cases)
    os.makedirs(f.output_dir, exist_ok=True)
    device = jax.devices()[0]
    peak_dtype = "bfloat16" if f.dtype_policy == "mixed_bfloat16" else "float32"
    peak_n = min(f.peak_n, 1024) if f.tiny else f.peak_n
    peak = matmul_peak_tflops(peak_n, peak_dtype)
    header = {"device": device.device_kind, "platform": device.platform, "dtype_policy": f.dtype_policy,
              "remat": f.remat, "accumulation": f.accumulation, "matmul_peak_tflops": round(peak, 2),
              "peak_dtype": peak_dtype, "peak_n": peak_n, "tiny": f.tiny}
    print(f"{device.device_kind} ({device.platform}), jax {jax.__version__}: {peak_dtype} matmul peak "
          f"{peak:.2f} TFLOP/s (n={peak_n}, best of 5)", flush=True)
    rows, skipped = [], []
    lines = os.path.join(f.output_dir, "results.jsonl")
    started = time.perf_counter()
    for preset, seq in cases:
        if f.budget_seconds and time.perf_counter() - started > f.budget_seconds:
            skipped.append(f"{preset}:{seq}")
            print(f"{preset}:{seq} not started: --budget_seconds={f.budget_seconds} spent", flush=True)
            continue
        config = AlbertConfig.from_preset(preset)
        if f.tiny:
            config = config.replace(**TINY_CONFIG)
        seq_len = min(seq, config.max_position_embeddings)
        batch_size = f.batch_size or BATCH[seq]
        if batch_size % f.accumulation:
            raise ValueError(f"--accumulation={f.accumulation} must divide the batch of {batch_size}.")
        predictions = min(PREDICTIONS[seq], seq_len // 4)
        batch = harness.pretraining_batch(config.vocab_size, batch_size, seq_len, predictions)
        flops = harness.training_flops_per_example(config, seq_len, predictions)
        models = [("albert_tf", lambda: albert_tf_model(config, f.dtype_policy, f.remat))]
        if f.peer:
            models.append(("keras_hub", lambda: keras_hub_model(config, f.dtype_policy)))
        for name, build in models:
            keras.backend.clear_session()
            model, loss_fn, inputs_fn = build()
            row = time_model(name, model, loss_fn, inputs_fn, batch, f, batch_size)
            tflops = row["examples_per_second"] * flops / 1e12
            row.update(case=f"{preset}:{seq}", seq_length=seq_len, batch_size=batch_size, predictions=predictions,
                       training_gflop_per_example=round(flops / 1e9, 3), tflops=round(tflops, 3),
                       fraction_of_matmul_peak=round(tflops / peak, 4), **header)
            rows.append(row)
            # every result so far, as each one finishes (a run cut short keeps what it measured)
            atomic.write_text(lines, "".join(json.dumps(r) + "\n" for r in rows))
            print(f"{preset} T{seq_len} B{batch_size} {name}: {row['step_seconds'] * 1e3:.1f} ms/step, "
                  f"{row['examples_per_second']:.1f} examples/s, {tflops:.2f} TFLOP/s "
                  f"({row['fraction_of_matmul_peak']:.1%} of peak), compile {row['compile_seconds']:.0f} s",
                  flush=True)
            del model
    atomic.write_json(os.path.join(f.output_dir, "results.json"),
                      {"settings": header, "machine": harness.machine(), "results": rows, "not_started": skipped})
    return 0


main, entry = entry_points.command("jax_train_step_bench", define_flags, run)


if __name__ == "__main__":
    os.environ.setdefault("KERAS_BACKEND", "jax")
    entry()
