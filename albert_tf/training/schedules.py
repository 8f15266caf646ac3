"""The release's learning-rate schedule: linear warmup, then polynomial decay to 0.

    decayed(step) = lr * (1 - min(step, num_train_steps) / num_train_steps) ** poly_power
    warmup(step)  = lr * max(step - start_warmup_step, 0) / num_warmup_steps
    lr(step)      = warmup(step) if step - start_warmup_step < num_warmup_steps else decayed(step)

As in the release, the decay counts from step 0 (not from the end of warmup). Before
start_warmup_step the release's warmup went negative; here it stays at 0.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup then polynomial decay (see module docstring).

    Example:
    ```python
    schedule = WarmupPolynomialDecay(0.00176, num_train_steps=125000, num_warmup_steps=3125)
    float(schedule(3125))  # 0.00176 * (1 - 3125 / 125000)
    ```
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0, poly_power=1.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.start_warmup_step = int(start_warmup_step)
        self.poly_power = float(poly_power)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        done = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        decayed = self.learning_rate * ops.power(1.0 - done, self.poly_power)
        if not self.num_warmup_steps:
            return decayed
        # The release's formula goes negative before start_warmup_step: hold at 0 instead.
        warm_steps = ops.maximum(step - float(self.start_warmup_step), 0.0)
        warmup = self.learning_rate * warm_steps / float(self.num_warmup_steps)
        return ops.where(warm_steps < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "start_warmup_step": self.start_warmup_step,
            "poly_power": self.poly_power,
        }
