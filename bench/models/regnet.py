"""A RegNet (torchvision's RegNetY-800MF, no weights): a model family the prediction model was not designed on (the
held-out suite's sixth round, bench/suites/heldout6.py). options: classes."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.regnet_y_800mf(weights=None, num_classes=o.get("classes", 100))
