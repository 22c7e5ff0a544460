"""ResNets nobody in the project wrote, built from their configs (no weights downloaded): Hugging Face transformers'
``ResNetForImageClassification`` (``build``; ``pip install transformers``) and torchvision's ResNet-50
(``torchvision_resnet50``; ``pip install torchvision``). BatchNorm throughout: under DDP its running statistics
are rank 0's, broadcast before every forward (spmd's reference does the same).

options (ResNet-50 by default): classes, embedding, widths, depths, layer (bottleneck or basic).
"""

from torch import nn


class Logits(nn.Module):
    """A transformers model's forward returns an output object: the loss takes its logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images):
        return self.model(pixel_values=images).logits


def build(params):
    from transformers import ResNetConfig, ResNetForImageClassification

    o = params["options"]
    config = ResNetConfig(
        num_channels=3,
        embedding_size=o.get("embedding", 64),
        hidden_sizes=list(o.get("widths", [256, 512, 1024, 2048])),
        depths=list(o.get("depths", [3, 4, 6, 3])),
        layer_type=o.get("layer", "bottleneck"),
        num_labels=o.get("classes", 100),
    )
    return Logits(ResNetForImageClassification(config))


def torchvision_resnet50(params):
    import torchvision

    return torchvision.models.resnet50(weights=None, num_classes=params["options"].get("classes", 100))
