# For Apache Beam's --setup_file (docs/pretraining_data.md "On a cluster"): Beam builds albert_tf
# from this file on every worker. The package's metadata is pyproject.toml's.
from setuptools import setup

setup()
