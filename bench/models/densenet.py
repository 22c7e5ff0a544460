"""A DenseNet (torchvision's DenseNet-121, no weights): a model family the prediction model was not designed on (the
held-out suite's fifth round, bench/suites/heldout5.py). options: classes."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.densenet121(weights=None, num_classes=o.get("classes", 100))
