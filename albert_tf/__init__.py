"""albert_tf: ALBERT (Lan et al., 2019) for TensorFlow 2 and Keras 3.

`from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer, AlbertForQuestionAnswering,
AlbertForMultipleChoice`.
The names are resolved lazily so that the data tools (`albert_tf.data`) run without
importing Keras or TensorFlow.
"""

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer", "AlbertForQuestionAnswering",
           "AlbertForMultipleChoice"]
# the one place of the version: pyproject.toml reads it from here (tool.setuptools.dynamic)
__version__ = "0.2.0"


def __getattr__(name):
    if name == "AlbertConfig":
        from albert_tf.modeling.config import AlbertConfig

        return AlbertConfig
    if name == "AlbertEncoder":
        from albert_tf.modeling.encoder import AlbertEncoder

        return AlbertEncoder
    if name == "AlbertPretrainer":
        from albert_tf.modeling.pretrainer import AlbertPretrainer

        return AlbertPretrainer
    if name == "AlbertForQuestionAnswering":
        from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

        return AlbertForQuestionAnswering
    if name == "AlbertForMultipleChoice":
        from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice

        return AlbertForMultipleChoice
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
