"""The project's scripts, each run as `python tools/NAME.py` from the repository root, and
importable as `tools.NAME` (the tests: `from tools import make_squad_data`). A tool that
imports a sibling imports it relatively when imported as `tools.NAME` and by its bare name
when run as a script (then tools/ is sys.path[0])."""
