"""A MobileNet (torchvision's MobileNetV3-Large, no weights): a model family the prediction model was not designed
on (the held-out suite's fourth round, bench/suites/heldout4.py). options: classes."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.mobilenet_v3_large(weights=None, num_classes=o.get("classes", 100))
