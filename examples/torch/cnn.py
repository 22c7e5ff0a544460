"""A small CNN for 3x32x32 images in 10 classes: two conv-BatchNorm-ReLU-pool blocks and a linear head.

Its BatchNorm layers keep running statistics: under DDP they are rank 0's, broadcast before every forward
(spmd's reference reproduces that), or global ones with ``params.sync_batchnorm: true`` (GPUs).
"""

from torch import nn


def build(params):
    width = params["options"].get("width", 16)
    dropout = params["options"].get("dropout", 0.1)
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.BatchNorm2d(2 * width),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(dropout),
        nn.Linear(2 * width * 8 * 8, 10),
    )
