"""A Swin Transformer (torchvision's Swin-T, no weights): a model family the prediction model was not designed on (the
held-out suite's seventh round, bench/suites/heldout7.py). options: classes."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.swin_t(weights=None, num_classes=o.get("classes", 100))
