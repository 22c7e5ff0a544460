"""An EfficientNet (torchvision's EfficientNet-B0, no weights): a model family the prediction model was not designed
on (the held-out suite's third round, bench/suites/heldout3.py). options: classes."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.efficientnet_b0(weights=None, num_classes=o.get("classes", 100))
