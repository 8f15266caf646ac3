"""Export: TF-Hub-style encoder and preprocessing SavedModels, and their Keras 3 loader."""
