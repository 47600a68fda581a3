"""What every engine runs: the tutorial's data and models, the forms its inputs take, seeded construction and
a run's own warnings. The recording side (torch); readers of a trace never import it.

    tutorial_data.py    the tutorial's RandomDataset and DataLoader, the model built and called, a teacher for training
    models.py           the model classes the catalogue names
    input_forms.py      how a batch is handed to the model: tensor, tuple, dict, keywords, list, hidden state
    seeding.py          seeded construction without torch's global RNG
    warning_capture.py  a run's warnings, collected without touching the process's filters
"""
