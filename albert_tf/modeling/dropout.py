"""Dropout drawn from a given seed: what lets a recomputed forward draw the first pass's masks.

A keras.layers.Dropout draws its mask from its own SeedGenerator, a state variable that
advances at every call, so calling it again gives another mask. `dropout(layer, x,
training, seed)` draws the same dropout (the layer's rate, kept values scaled by
1 / (1 - rate)) statelessly from `seed`, an int [2] tensor: the same seed, the same mask.
AlbertEncoder draws one seed per dropout site and application once per forward and passes
them to its sub-layers (modeling/encoder.py).
"""

import keras


class GivenSeed(keras.random.SeedGenerator):
    """A seed already drawn (an int [2] tensor), for `keras.random` functions.

    It holds no state variable and returns the same tensor at every `next()` (on JAX as
    uint32): a stateless draw from a seed computed in the graph
    (docs/design_encoder.md#dropout-seeds).

    Args:
        seed: int32 or int64 [2] (uint32 on JAX).
    """

    # Keras' PyTorch dropout draws from a seed only when the generator has an initial seed
    # (else it takes torch's global RNG, unseeded): this one always has one, the tensor given.
    _initial_seed = "given"

    def __init__(self, seed):  # no super().__init__: no state variable to create or track
        self.seed = seed
        self.name = "given_seed"

    def next(self, ordered=True):
        if keras.config.backend() == "jax" and self.seed.dtype != "uint32":
            return keras.ops.cast(self.seed, "uint32")
        return self.seed


def dropout(layer, x, training, seed=None):
    """Keras Dropout `layer` on x, drawn from its own SeedGenerator (`seed` None), or the same
    dropout (rate, scaling by 1 / (1 - rate), x's dtype) drawn statelessly from `seed`.

    Args:
        layer: a keras.layers.Dropout (its rate; its SeedGenerator when `seed` is None).
        x: float tensor of any shape.
        training: bool; dropout acts only when true.
        seed: None, or int32 [2]: one dropout site's seed (the same seed, the same mask).
    Returns:
        x's shape and dtype.
    """
    if seed is None:
        return layer(x, training=training)
    if not training or layer.rate == 0:
        return x
    return keras.random.dropout(x, layer.rate, seed=GivenSeed(seed))
