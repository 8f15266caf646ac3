"""RACE and generic multiple-choice data: files -> examples -> [N, C, T] features -> cached TFRecords."""
