"""Which dtype policy a command computes in (`--dtype_policy`: auto, float32 or
mixed_bfloat16), decided in one place for every command: docs/mixed_precision.md.

    precision = choose("auto")                  # Precision(policy="float32", reason="CPU without ...")
    with policy_scope(precision.policy):
        model = build_model()                   # its layers compute in precision.policy
"""

import contextlib
import dataclasses

from albert_tf.storage.options import option
from albert_tf.storage.provenance import gpu_devices, read_cpuinfo

POLICIES = ("auto", "float32", "mixed_bfloat16")
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
_warned = set()


POLICY_HELP = ("What the model computes in: auto (mixed_bfloat16 where the hardware computes bf16 natively: TPUs, "
               "GPUs of compute capability >= 8.0, CPUs with avx512_bf16 or amx_bf16; float32 elsewhere), float32 "
               "or mixed_bfloat16. Variables and checkpoints stay float32 either way.")


@dataclasses.dataclass(kw_only=True)
class PrecisionOptions:
    """The one source of every command's --dtype_policy: the library's default float32, the
    commands' auto (an export's record gives float32 again: the exporting machine is not the
    serving one)."""

    dtype_policy: str = option("float32", POLICY_HELP, setting=True, flag_default="auto")


@dataclasses.dataclass(frozen=True)
class Precision:
    """A resolved dtype policy.

    Attributes:
        requested: what was asked ("auto", "float32" or "mixed_bfloat16").
        policy: what the model computes in ("float32" or "mixed_bfloat16").
        native_bf16: whether this hardware computes bf16 natively.
        hardware: what was found (e.g. "CPU AMD EPYC (flags: none of avx512_bf16, amx_bf16)").
        reason: one sentence: why `policy`.
    """

    requested: str
    policy: str
    native_bf16: bool
    hardware: str
    reason: str

    def as_dict(self):
        return {"dtype_policy": self.policy, "dtype_policy_requested": self.requested,
                "dtype_policy_reason": self.reason, "native_bf16": self.native_bf16, "hardware": self.hardware}


def check_policy(value, flag="--dtype_policy"):
    """The validated policy name; ValueError naming the flag and the valid values."""
    if value in POLICIES:
        return value
    hint = (" (mixed_float16 needs loss scaling, which the driver does not do; use mixed_bfloat16)"
            if value == "mixed_float16" else "")
    raise ValueError(f"{flag}={value!r} is not one of {', '.join(POLICIES)}{hint}.")


def native_bf16(strategy=None, cpuinfo="/proc/cpuinfo", gpus=None, tpu=False):
    """(native: bool, hardware: str): whether the devices the run computes on do bf16 natively.

    Args:
        strategy: the run's tf.distribute strategy (a TPUStrategy means TPUs).
        cpuinfo: where the CPU flags are read.
        gpus: [(name, (major, minor) or None)] instead of asking TensorFlow (tests).
        tpu: the run will compute on TPUs (its strategy not made yet: a run's settings
            are checked before any work).
    """
    if tpu:
        return True, "TPU"
    if strategy is not None:
        import tensorflow as tf

        if isinstance(strategy, tf.distribute.TPUStrategy):
            return True, "TPU"
    gpus = gpu_devices() if gpus is None else gpus
    if gpus:
        capabilities = [cc for _, cc in gpus]
        names = ", ".join(f"{name} (compute capability {'.'.join(map(str, cc)) if cc else 'unknown'})"
                          for name, cc in gpus)
        native = all(cc is not None and tuple(cc) >= (8, 0) for cc in capabilities)
        return native, f"GPU {names}"
    model, all_flags = read_cpuinfo(cpuinfo)
    flags = [x for x in CPU_BF16_FLAGS if x in all_flags]
    return bool(flags), (f"CPU {model} (flags: {', '.join(flags)})" if flags
                         else f"CPU {model} (flags: none of {', '.join(CPU_BF16_FLAGS)})")


def choose(requested="auto", strategy=None, cpuinfo="/proc/cpuinfo", gpus=None, warn=None, tpu=False):
    """Resolves a --dtype_policy value for this hardware.

    Args:
        requested: "auto", "float32" or "mixed_bfloat16" (anything else: ValueError).
        strategy, cpuinfo, gpus, tpu: see `native_bf16`.
        warn: callable(str) for the one-time warning when mixed_bfloat16 is asked for on
            hardware without native bf16 (default: absl logging.warning).
    Returns:
        Precision.
    """
    requested = check_policy(requested)
    native, hardware = native_bf16(strategy, cpuinfo, gpus, tpu)
    if requested == "float32":
        return Precision(requested, "float32", native, hardware, "asked for float32")
    if requested == "mixed_bfloat16":
        reason = "asked for mixed_bfloat16"
        if not native:
            reason += f"; {hardware} has no native bf16, so this runs slower than float32 here"
            if hardware not in _warned:
                _warned.add(hardware)
                if warn is None:
                    from absl import logging

                    warn = logging.warning
                warn(f"--dtype_policy=mixed_bfloat16 on {hardware}: no native bf16, slower than float32 here "
                     "(results are the same within bf16 rounding).")
        return Precision(requested, "mixed_bfloat16", native, hardware, reason)
    if native:
        return Precision(requested, "mixed_bfloat16", True, hardware, f"auto: {hardware} computes bf16 natively")
    return Precision(requested, "float32", False, hardware,
                     f"auto: {hardware} has no native bf16 (emulated bf16 is slower than float32)")


@contextlib.contextmanager
def policy_scope(policy):
    """Keras' global dtype policy set to `policy` ("float32" / "mixed_bfloat16") inside the
    block, restored after: the layers created inside compute in it (those created with an
    explicit dtype, e.g. float32 heads, keep theirs)."""
    import keras

    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)
