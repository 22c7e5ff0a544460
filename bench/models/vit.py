"""A Vision Transformer (torchvision's ViT-B/16, no weights) at the images' own size: a model family the prediction
model was not designed on (the held-out suite, bench/suites/heldout.py). options: classes, image (pixels a side)."""


def build(params):
    import torchvision

    o = params.get("options") or {}
    return torchvision.models.vit_b_16(weights=None, image_size=o.get("image", 128), num_classes=o.get("classes", 100))
