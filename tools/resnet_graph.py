#!/usr/bin/env python3
"""Writes examples/resnet_graph.json: examples/resnet.json's ResNet-18 keypoint regressor as a
graph of layers (the built-in resnet's parameter names, in its order of creation, so the two
train bit for bit alike). Run it again after changing the layout:
    python3 tools/resnet_graph.py > examples/resnet_graph.json"""
import json

K, C, SIZE = 4, 3, 64
layers = []


def L(name, op, inputs, **attrs):
    layers.append(dict(name=name, op=op, inputs=inputs, **attrs))
    return name


def conv(name, x, out, k, stride, pad):
    return L(name, "conv2d", [x], out=out, kernel=k, stride=stride, padding=pad, bias=False)


def block(i, x, cin, cout, stride):
    b = "blocks.%d" % i
    sc = x
    if stride != 1 or cin != cout:  # the shortcut's parameters come first, as the builder makes them
        sc = L(b + ".down.1", "batchnorm", [conv(b + ".down.0", x, cout, 1, stride, 0)])
    h = L(b + ".b1", "batchnorm", [conv(b + ".c1", x, cout, 3, stride, 1)], relu=True)
    return L(b + ".b2", "batchnorm", [conv(b + ".c2", h, cout, 3, 1, 1), sc], relu=True)


h = L("stem.1", "batchnorm", [conv("stem.0", "x", 64, 7, 2, 3)], relu=True)
h = L("pool", "maxpool2d", [h], kernel=3, stride=2, padding=1)
cin, index = 64, 0
for stage in range(4):
    width = 64 << stage
    for i in range(2):
        h = block(index, h, cin, width, 2 if stage > 0 and i == 0 else 1)
        cin, index = width, index + 1
h = L("gap", "global_avgpool", [h])
h = L("head", "linear", [h], out=2 * K)
kp = L("keypoints", "reshape", [h], shape=[K, 2])
# a keypoint not visible drops out of the sum; the mean stays over all 2K coordinates
v = L("visible_k", "reshape", ["visible"], shape=[K, 1])
L("pred_seen", "mul", [kp, v])
L("true_seen", "mul", ["y", v])

config = {
    "model": {
        "type": "graph",
        "inputs": [{"name": "x", "shape": [C, SIZE, SIZE]}, {"name": "y", "shape": [K, 2]},
                   {"name": "visible", "shape": [K]}],
        "layers": layers,
        "outputs": ["keypoints"],
        "losses": [{"output": "pred_seen", "target": "true_seen", "type": "mse"}],
    },
    "data": {"images": {"labels": "data/labels.csv", "size": [SIZE, SIZE], "mean": [0.5, 0.5, 0.5],
                        "std": [0.25, 0.25, 0.25],
                        "augment": {"flip": 0.5, "flip_pairs": [0, 1, 2, 3], "crop": 0.9}},
             "validation_fraction": 0.2},
    "optim": {"type": "adamw", "lr": 1e-3, "weight_decay": 0.01, "clip_norm": 1.0},
    "train": {"batch_size": 32, "epochs": 10, "seed": 0, "log_every": 4},
    "speed": {"device": "auto", "prefetch": 4},
}
print("// examples/resnet.json's ResNet-18 keypoint regressor as a graph of layers, written by")
print("// tools/resnet_graph.py: it trains bit for bit as the built-in resnet (tests/nn/graph_equivalence.sh).")
text = json.dumps(config, indent=1)
# one layer, one input, one loss per line
lines = [json.dumps(x) for x in layers]
text = json.dumps(config, indent=2)
for key in ("layers", "inputs", "losses"):
    items = config["model"][key]
    block = json.dumps(items, indent=2).replace("\n", "\n    ")
    text = text.replace(block, "[\n      " + ",\n      ".join(json.dumps(x) for x in items) + "\n    ]")
print(text)
