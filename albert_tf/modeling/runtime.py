"""Run-time options of an AlbertEncoder: how it runs, not what it is.

`EncoderRuntime` switches the pieces of modeling/encoder_runtime.py (docs/design_encoder.md);
they are neither in `get_config` nor in any weights file or checkpoint. `RuntimeOptions` sets
them, on the encoder or on a model holding it as `self.encoder`:

    model = AlbertPretrainer(config, runtime={"remat": True})   # or EncoderRuntime(remat=True)
    model.configure_runtime(skip_padding=True)                 # True: an AlbertEncoder took them
    with model.runtime_options(skip_padding=False): ...        # restored after the block
    with model.tracing_for_export(): ...                       # the plain forward, for a SavedModel
"""

import contextlib
import dataclasses


@dataclasses.dataclass(frozen=True)
class EncoderRuntime:
    """How an AlbertEncoder runs: choices of a run, not of the architecture (the outputs are
    the same to float rounding, but for `skip_padding`'s zeros at padded positions). The
    defaults are the pieces every forward has used; `EncoderRuntime.plain()` switches all off.

    Attributes:
        rows: bool. Every per-token op on rows [B * T, H] (docs/design_encoder.md#rows-not-b-t-h).
        skip_padding: bool. Per-token work on the real tokens only
            (docs/design_encoder.md#skipping-padding); for eager and tf.function runs, not
            XLA or TPUs (data-dependent shapes).
        cast_once: bool. Each sub-layer's dense weights read (and cast to the compute dtype)
            once per forward, their bf16 bias gradients summed in float32
            (docs/design_encoder.md#weights-cast-once-and-bias-gradients).
        remat: bool. In training, each application of a sub-layer rematerialized
            (docs/design_encoder.md#rematerialization); draws the dropout seeds whatever
            `dropout_seeds` says (the recomputed forward draws the first pass's masks).
        ordered_gradients: bool. In training, the backward pass of the applications of a
            shared sub-layer in order (docs/design_encoder.md#ordered-gradients-of-shared-weights);
            links the weights `cast_once` gives (none without it); off while tracing an export
            (a SavedModel cannot hold its gradient function).
        dropout_seeds: bool. In training, every dropout mask drawn statelessly from a seed per
            site and application, drawn once per forward (docs/design_encoder.md#dropout-seeds);
            off: each Dropout layer draws from its own generator.
        replica_index: None, or a callable -> int scalar: this replica's index inside a
            distributed step, folded into the dropout seeds.
    """

    skip_padding: bool = False
    remat: bool = False
    ordered_gradients: bool = True
    replica_index: object = None
    rows: bool = True
    cast_once: bool = True
    dropout_seeds: bool = True

    @classmethod
    def plain(cls, **options):
        """Every piece off (the forward as the model draws it), then `options`."""
        return cls(ordered_gradients=False, rows=False, cast_once=False, dropout_seeds=False).replace(**options)

    def replace(self, **changes):
        """A copy with `changes`; TypeError naming an option that does not exist."""
        unknown = sorted(set(changes) - {field.name for field in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown encoder run-time option(s) {', '.join(unknown)}; expected "
                            f"{', '.join(field.name for field in dataclasses.fields(self))}.")
        for name in ("skip_padding", "remat", "ordered_gradients", "rows", "cast_once", "dropout_seeds"):
            if name in changes:
                changes[name] = bool(changes[name])
        index = changes.get("replica_index")
        if index is not None and not callable(index):
            raise TypeError(f"replica_index must be None or a callable, got {type(index).__name__}.")
        return dataclasses.replace(self, **changes)


def as_runtime(runtime):
    """None, an EncoderRuntime or a dict of its options -> an EncoderRuntime."""
    if runtime is None:
        return EncoderRuntime()
    if isinstance(runtime, EncoderRuntime):
        return runtime
    if isinstance(runtime, dict):
        return EncoderRuntime().replace(**runtime)
    raise TypeError(f"runtime must be None, an EncoderRuntime or a dict of its options, got {type(runtime).__name__}.")


class RuntimeOptions:
    """Run-time options (`EncoderRuntime`) of an AlbertEncoder, or of a model holding one as
    `self.encoder` (mixed into AlbertEncoder, AlbertPretrainer, AlbertClassifier and the
    fine-tuned models). A model whose encoder is no AlbertEncoder (e.g. an exported encoder
    loaded as a TFSMLayer) takes none: `configure_runtime` returns False and changes nothing."""

    def _runtime_encoder(self):
        """The AlbertEncoder whose options these are (AlbertEncoder returns itself): here
        `self.encoder` when it holds its own options, else None."""
        encoder = getattr(self, "encoder", None)
        if isinstance(encoder, RuntimeOptions) and encoder._runtime_encoder() is encoder:
            return encoder
        return None

    @property
    def runtime(self):
        """The encoder's EncoderRuntime, or None without an AlbertEncoder."""
        encoder = self._runtime_encoder()
        return None if encoder is None else encoder._runtime

    def configure_runtime(self, **options):
        """Sets the encoder's run-time options (`EncoderRuntime` fields, e.g. `remat=True`);
        the others keep their values.

        Returns:
            bool: whether the model has an AlbertEncoder that took them.
        Raises:
            TypeError: an option that does not exist (named), a replica_index not callable.
        """
        encoder = self._runtime_encoder()
        runtime = (EncoderRuntime() if encoder is None else encoder._runtime).replace(**options)
        if encoder is None:
            return False
        encoder._runtime = runtime
        return True

    @contextlib.contextmanager
    def runtime_options(self, **options):
        """A block with `configure_runtime(**options)`, the options before restored after;
        yields configure_runtime's answer."""
        encoder = self._runtime_encoder()
        before = None if encoder is None else encoder._runtime
        applied = self.configure_runtime(**options)
        try:
            yield applied
        finally:
            if encoder is not None:
                encoder._runtime = before

    def tracing_for_export(self):
        """A block in which the encoder runs its plain training forward: no
        rematerialization and no ordered gradients (a SavedModel cannot hold their gradient
        functions, so an export traces the same graph whatever the run that trained the
        weights used); yields whether the model has an AlbertEncoder."""
        return self.runtime_options(remat=False, ordered_gradients=False)
