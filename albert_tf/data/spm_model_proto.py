"""SentencePiece's model file format (`ModelProto`), read and written without sentencepiece_model_pb2
(which sentencepiece 0.2.3 generated for protobuf 7, while Apache Beam needs protobuf below 7): the
message classes are built from `sentencepiece_model.json` beside this file, the
FileDescriptorProto of SentencePiece's sentencepiece_model.proto as JSON.

    from albert_tf.data.spm_model_proto import ModelProto
    proto = ModelProto.FromString(files.read_bytes("spm.model"))
    proto.pieces[0].piece, proto.normalizer_spec.name
    ModelProto.SentencePiece.UNUSED  # the piece types, TrainerSpec.UNIGRAM, ...
"""

from albert_tf.storage import files
from albert_tf.storage.json_files import read_json

SCHEMA = files.join(files.dirname(files.abspath(__file__)), "sentencepiece_model.json")


def _classes():
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

    schema = json_format.ParseDict(read_json(SCHEMA, "SentencePiece's model schema (albert_tf package data)",
                                             "reinstall albert_tf"), descriptor_pb2.FileDescriptorProto())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return [message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{schema.package}.{name}"))
            for name in ("ModelProto", "NormalizerSpec", "TrainerSpec")]


ModelProto, NormalizerSpec, TrainerSpec = _classes()
