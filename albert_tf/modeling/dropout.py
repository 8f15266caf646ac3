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

    keras.random's functions take a Python int or a SeedGenerator as `seed`, not a tensor
    (keras 3.15's `draw_seed`); with a SeedGenerator they call its `next()`. This one holds
    no state variable (SeedGenerator.__init__ would create one) and returns the same tensor at
    every call: a stateless draw from a seed computed in the graph.

    Args:
        seed: int32 or int64 [2].
    """

    def __init__(self, seed):  # no super().__init__: no state variable to create or track
        self.seed = seed
        self.name = "given_seed"

    def next(self, ordered=True):
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
