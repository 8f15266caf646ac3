"""What the fine-tuning tasks share: where a run's albert_config.json comes from."""

import os


def config_file_for(o):
    """The albert_config.json: --albert_config_file, the export's, or the one in an
    --init_checkpoint directory; None when none."""
    if o.albert_config_file:
        return o.albert_config_file
    if o.albert_hub_module_handle:
        return os.path.join(o.albert_hub_module_handle, "encoder", "assets", "albert_config.json")
    if o.init_checkpoint and os.path.isdir(o.init_checkpoint):
        candidate = os.path.join(o.init_checkpoint, "albert_config.json")
        if os.path.isfile(candidate):
            return candidate
    return None
