"""albert_tf: ALBERT (Lan et al., 2019) for TensorFlow 2 and Keras 3.

`from albert_tf import` the names of `__all__`, resolved lazily so that the data tools
(`albert_tf.data`) run without importing Keras or TensorFlow.
"""

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer", "AlbertForQuestionAnswering",
           "AlbertForMultipleChoice"]
# the one place of the version: pyproject.toml reads it from here (tool.setuptools.dynamic)
__version__ = "0.3.0"


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
    from albert_tf.modeling import AlbertConfig, AlbertEncoder, AlbertPretrainer  # noqa: F401
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice  # noqa: F401
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering  # noqa: F401

    return locals()[name]
