"""A ConvNeXt (torchvision's ConvNeXt-Tiny, no weights): a model family the prediction model was not designed on
(the held-out suite's second round, bench/suites/heldout2.py). options: classes."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.convnext_tiny(weights=None, num_classes=o.get("classes", 100))
