"""A brisk graph model (a config's "model": {"type": "graph", ...}) as a PyTorch module, for
checking brisk against PyTorch on identical weights and data (tests/reference/check_graph.py).

Each layer op becomes the torch module or function its entry in brisk's op table names
(src/nn/layer_ops.c, `brisk config --reference`); parameters carry brisk's names
("<layer>.weight", ...), so a brisk checkpoint's tensors load by name. Layer names may hold
dots (net.0), which torch's ModuleDict refuses: modules are kept under escaped keys and
`named` maps brisk's names to the tensors.
"""
import json
import re

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_config(path):
    """brisk's JSON with // comments (outside strings) removed."""
    out = []
    for line in open(path):
        s, in_str, i = line, False, 0
        while i < len(s):
            c = s[i]
            if c == '"' and (i == 0 or s[i - 1] != "\\"):
                in_str = not in_str
            elif not in_str and s.startswith("//", i):
                s = s[:i] + "\n"
                break
            i += 1
        out.append(s)
    return json.loads("".join(out))


def _pair(v, default=None):
    if v is None:
        v = default
    return (v, v) if isinstance(v, int) else tuple(v)


def _key(name):
    return re.sub(r"[^A-Za-z0-9_]", lambda m: "_x%02x_" % ord(m.group()), name)


class GraphModel(nn.Module):
    def __init__(self, model, sample_shapes):
        """model: the config's model object; sample_shapes: {input name: per-sample shape}."""
        super().__init__()
        self.spec = model
        self.layers = model["layers"]
        self.mods = nn.ModuleDict()
        shapes = dict(sample_shapes)
        for L in self.layers:
            m, out_shape = self._make(L, [shapes[i] for i in L["inputs"]])
            if m is not None:
                self.mods[_key(L["name"])] = m
            shapes[L["name"]] = out_shape
        self.shapes = shapes

    def named(self):
        """brisk's parameter and buffer names -> tensors"""
        out = {}
        for L in self.layers:
            k = _key(L["name"])
            if k in self.mods:
                for n, t in list(self.mods[k].named_parameters()) + list(self.mods[k].named_buffers()):
                    if not n.endswith("num_batches_tracked"):
                        out[L["name"] + "." + n] = t
        return out

    def _make(self, L, ins):
        op, s = L["op"], ins[0]
        if op == "linear":
            return nn.Linear(s[-1], L["out"], bias=L.get("bias", True)), s[:-1] + [L["out"]]
        if op == "conv2d":
            k, st, p = _pair(L["kernel"]), _pair(L.get("stride"), 1), _pair(L.get("padding"), 0)
            m = nn.Conv2d(s[0], L["out"], k, st, p, groups=L.get("groups", 1), bias=L.get("bias", True))
            h = (s[1] + 2 * p[0] - k[0]) // st[0] + 1
            w = (s[2] + 2 * p[1] - k[1]) // st[1] + 1
            return m, [L["out"], h, w]
        if op == "conv1d":
            k, st, p, dl = L["kernel"], L.get("stride", 1), L.get("padding", 0), L.get("dilation", 1)
            m = nn.Conv1d(s[0], L["out"], k, st, p, dl, groups=L.get("groups", 1), bias=L.get("bias", True))
            return m, [L["out"], (s[1] + 2 * p - dl * (k - 1) - 1) // st + 1]
        if op == "conv_transpose2d":
            k, st, p = _pair(L["kernel"]), _pair(L.get("stride"), 1), _pair(L.get("padding"), 0)
            op_ = _pair(L.get("output_padding"), 0)
            m = nn.ConvTranspose2d(s[0], L["out"], k, st, p, op_, groups=L.get("groups", 1), bias=L.get("bias", True))
            return m, [L["out"], (s[1] - 1) * st[0] - 2 * p[0] + k[0] + op_[0], (s[2] - 1) * st[1] - 2 * p[1] + k[1] + op_[1]]
        if op == "upsample":
            f = _pair(L["scale"])
            return None, [s[0], s[1] * f[0], s[2] * f[1]]
        if op == "group_norm":
            return nn.GroupNorm(L["groups"], s[0], eps=L.get("eps", 1e-5)), s
        if op == "batchnorm":
            m = (nn.BatchNorm2d if len(s) == 3 else nn.BatchNorm1d)(s[0], eps=L.get("eps", 1e-5),
                                                                     momentum=L.get("momentum", 0.1))
            return m, s
        if op == "layernorm":
            return nn.LayerNorm(s[-1], eps=L.get("eps", 1e-5)), s
        if op in ("maxpool2d", "avgpool2d"):
            k = _pair(L["kernel"])
            st, p = _pair(L.get("stride"), None) if L.get("stride") else k, _pair(L.get("padding"), 0)
            return None, [s[0], (s[1] + 2 * p[0] - k[0]) // st[0] + 1, (s[2] + 2 * p[1] - k[1]) // st[1] + 1]
        if op == "global_avgpool":
            return None, [s[0]]
        if op == "flatten":
            n = 1
            for d in s[L.get("start_dim", 1) - 1:]:
                n *= d
            return None, s[:L.get("start_dim", 1) - 1] + [n]
        if op == "reshape":
            shape, total = list(L["shape"]), 1
            for d in s:
                total *= d
            if -1 in shape:
                known = 1
                for d in shape:
                    known *= d if d != -1 else 1
                shape[shape.index(-1)] = total // known
            return None, shape
        if op == "permute":
            return None, [s[d - 1] for d in L["dims"]]
        if op == "slice":
            d = L["dim"]
            out = list(s)
            out[(d if d > 0 else len(s) + 1 + d) - 1] = L["length"]
            return None, out
        if op == "concat":
            d = L.get("dim", -1)
            di = (d if d > 0 else len(s) + 1 + d) - 1
            out = list(s)
            out[di] = sum(x[di] for x in ins)
            return None, out
        if op == "embedding":
            return nn.Embedding(L["num"], L["dim"]), s + [L["dim"]]
        if op in ("lstm", "gru"):
            m = (nn.LSTM if op == "lstm" else nn.GRU)(s[-1], L["hidden"], num_layers=L.get("layers", 1),
                                                     batch_first=True, bidirectional=L.get("bidirectional", False),
                                                     dropout=L.get("dropout", 0.0))
            return m, s[:-1] + [L["hidden"] * (2 if L.get("bidirectional", False) else 1)]
        if op in ("add", "sub", "mul"):
            return None, max(ins, key=len)
        if op in ("minimum", "maximum"):
            return None, max(ins, key=len)
        if op in ("relu", "gelu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout", "scale", "leaky_relu",
                  "elu", "softplus", "exp", "log", "sqrt", "abs", "pow", "clamp"):
            return None, s
        raise NotImplementedError("graph.py: layer op %r" % op)

    def forward(self, inputs):
        """inputs: {input name: batch tensor}; returns {name: tensor} for every input and layer"""
        v = dict(inputs)
        for L in self.layers:
            op, x = L["op"], [v[i] for i in L["inputs"]]
            m = self.mods[_key(L["name"])] if _key(L["name"]) in self.mods else None
            if op in ("linear", "conv2d", "conv1d", "conv_transpose2d", "group_norm", "layernorm", "embedding"):
                y = m(x[0].long() if op == "embedding" else x[0])
            elif op == "batchnorm":
                y = m(x[0])
                if len(x) > 1:
                    y = y + x[1]
                if L.get("relu"):
                    y = F.relu(y)
            elif op == "maxpool2d":
                y = F.max_pool2d(x[0], _pair(L["kernel"]), _pair(L.get("stride")) if L.get("stride") else None,
                                 _pair(L.get("padding"), 0))
            elif op == "avgpool2d":
                y = F.avg_pool2d(x[0], _pair(L["kernel"]), _pair(L.get("stride")) if L.get("stride") else None,
                                 _pair(L.get("padding"), 0))
            elif op == "global_avgpool":
                y = x[0].mean(dim=tuple(range(2, x[0].dim())))
            elif op == "flatten":
                y = torch.flatten(x[0], L.get("start_dim", 1))
            elif op == "reshape":
                y = x[0].reshape([x[0].shape[0]] + list(L["shape"]))
            elif op == "permute":
                y = x[0].permute(0, *L["dims"])
            elif op == "slice":
                y = x[0].narrow(L["dim"], L["start"], L["length"])
            elif op == "concat":
                y = torch.cat(x, dim=L.get("dim", -1))
            elif op in ("lstm", "gru"):
                y = m(x[0])[0]
            elif op == "add":
                y = x[0] + x[1]
            elif op == "sub":
                y = x[0] - x[1]
            elif op == "mul":
                y = x[0] * x[1]
            elif op == "relu":
                y = F.relu(x[0])
            elif op == "gelu":
                y = F.gelu(x[0], approximate=L.get("approximate", "none"))
            elif op == "silu":
                y = F.silu(x[0])
            elif op == "tanh":
                y = torch.tanh(x[0])
            elif op == "sigmoid":
                y = torch.sigmoid(x[0])
            elif op == "softmax":
                y = F.softmax(x[0], dim=-1)
            elif op == "log_softmax":
                y = F.log_softmax(x[0], dim=-1)
            elif op == "upsample":
                mode = L.get("mode", "nearest")
                y = F.interpolate(x[0], scale_factor=_pair(L["scale"]), mode=mode,
                                  align_corners=False if mode == "bilinear" else None)
            elif op == "leaky_relu":
                y = F.leaky_relu(x[0], L.get("negative_slope", 0.01))
            elif op == "elu":
                y = F.elu(x[0], L.get("alpha", 1.0))
            elif op == "softplus":
                y = F.softplus(x[0], L.get("beta", 1.0), L.get("threshold", 20.0))
            elif op in ("exp", "log", "sqrt", "abs"):
                y = getattr(torch, op)(x[0])
            elif op == "pow":
                y = torch.pow(x[0], L["exponent"])
            elif op == "clamp":
                y = torch.clamp(x[0], L.get("min"), L.get("max"))
            elif op == "minimum":
                y = torch.minimum(x[0], x[1])
            elif op == "maximum":
                y = torch.maximum(x[0], x[1])
            elif op == "dropout":
                y = F.dropout(x[0], L.get("p", 0.5), self.training)
            elif op == "scale":
                y = x[0] * L.get("mul", 1.0) + L.get("add", 0.0)
            else:
                raise NotImplementedError("graph.py: layer op %r" % op)
            v[L["name"]] = y
        return v

    def loss(self, v):
        """the weighted sum of the config's losses over forward()'s values"""
        total = 0.0
        for l in self.spec["losses"]:
            p, t = v[l["output"]], v[l["target"]]
            w = v[l["mask"]].expand_as(p) if l.get("mask") else None
            if l["type"] == "cross_entropy":
                term = F.cross_entropy(p, t.long())
            elif l["type"] in ("l1", "huber", "bce_with_logits"):
                el = {"l1": lambda: F.l1_loss(p, t, reduction="none"),
                      "huber": lambda: F.huber_loss(p, t, reduction="none", delta=l.get("delta", 1.0)),
                      "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(p, t, reduction="none")}[l["type"]]()
                term = el.mean() if w is None else (el * w).sum() / w.sum()
            elif l.get("mask"):
                w = v[l["mask"]].expand_as(p)
                term = ((p - t) ** 2 * w).sum() / w.sum()
            else:
                term = F.mse_loss(p, t)
            total = total + l.get("weight", 1.0) * term
        return total
