"""PyTorch versions of the benchmark models of bench/WORKLOADS.md.

They serve two purposes, and both depend on the names here:

* The equivalence tests (tests/reference/check_torch.py, tests/cli/*.sh, python/tests) load a
  brisk checkpoint into these modules with load_state_dict and compare outputs, losses,
  gradients and predictions. brisk names its parameters after the attributes below
  ("net.0.weight", "blocks.3.c1.weight", "processor.2.edge.0.weight", ...), so renaming an
  attribute or reordering an nn.Sequential breaks those tests and the README's recipe for
  reading brisk weights in PyTorch.
* The side-by-side benchmark (bench/reference/timed.py, bench/run.sh) times the same models in
  PyTorch, so each brisk/PyTorch ratio compares the same work.

Each model's loss(inputs...) is one training step's forward pass up to the scalar loss. The
defaults are the workload sizes; the keyword arguments exist for the tests (smaller heads, the
small mesh) and for bench/shape_sweep.py, which moves the sizes off the workloads'.

Runs on PyTorch 1.13 and 2.x.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- diffusion

def sinusoidal(t, dim):
    """Timestep embedding [sin(t f_0..f_{h-1}) | cos(...)], f_i = 10000^(-i/h), h = dim / 2.
    Computed in float32, as brisk does, so the two agree to rounding."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    a = t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(a), torch.cos(a)], dim=1)


class Denoiser(nn.Module):
    """Conditional DDPM noise predictor: an MLP over [x_t | coarse | embedding of t] that
    predicts the noise added to the fine field; loss MSE on that noise."""

    def __init__(self, fine=256, coarse=7, temb=32, hidden=256, T=50):
        super().__init__()
        self.temb, self.T = temb, T
        self.net = nn.Sequential(
            nn.Linear(fine + coarse + temb, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, fine))
        # The linear beta schedule's cumulative product. A buffer, not a weight: brisk's
        # checkpoints do not hold it, so loading one needs strict=False (its only missing key).
        betas = torch.linspace(1e-4, 0.02, T)
        self.register_buffer("abar", torch.cumprod(1 - betas, 0))

    def loss(self, coarse, x0):
        t = torch.randint(0, self.T, (x0.shape[0],), device=x0.device)
        eps = torch.randn_like(x0)
        ab = self.abar[t][:, None]
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
        pred = self.net(torch.cat([xt, coarse, sinusoidal(t, self.temb)], dim=1))
        return F.mse_loss(pred, eps)


# ---------------------------------------------------------------- tabular and sequences

class Tabular(nn.Module):
    """MLP classifier, ReLU and dropout after each hidden layer. The Dropout modules take
    indices in net, which is why brisk's names skip from net.0 to net.3."""

    def __init__(self, inputs=64, hidden=(512, 256, 128), outputs=3, dropout=0.1):
        super().__init__()
        layers, cin = [], inputs
        for h in hidden:
            layers += [nn.Linear(cin, h), nn.ReLU(), nn.Dropout(dropout)]
            cin = h
        self.net = nn.Sequential(*layers, nn.Linear(cin, outputs))

    def loss(self, x, y):
        return F.cross_entropy(self.net(x), y)


class LSTMClassifier(nn.Module):
    """Stacked LSTM over [batch, time, features]; the last step's state -> Linear -> classes."""

    def __init__(self, inputs=32, hidden=128, layers=2, outputs=3):
        super().__init__()
        self.lstm = nn.LSTM(inputs, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, outputs)

    def loss(self, x, y):
        out, _ = self.lstm(x)
        return F.cross_entropy(self.head(out[:, -1]), y)


class TransformerClassifier(nn.Module):
    """Input projection plus learned positions, pre-LN encoder layers, mean over time,
    LayerNorm, Linear -> classes."""

    def __init__(self, d=128, seq=60, inputs=32, heads=4, ffn=512, layers=3, outputs=3):
        super().__init__()
        self.proj = nn.Linear(inputs, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, outputs)

    def loss(self, x, y):
        h = self.enc(self.proj(x) + self.pos)
        return F.cross_entropy(self.head(self.norm(h.mean(dim=1))), y)


# ---------------------------------------------------------------- resnet

class BasicBlock(nn.Module):
    """relu(b2(c2(relu(b1(c1(x))))) + shortcut(x)); the shortcut is a strided 1x1 convolution
    and BatchNorm ("down.0", "down.1") where the shape changes, else the identity."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = self.b2(self.c2(h))
        return F.relu(h + (x if self.down is None else self.down(x)))


class ResNet18Keypoints(nn.Module):
    """ResNet-18 (torchvision's layout, BasicBlocks [2, 2, 2, 2]) with a global average pool and
    Linear(512, outputs): outputs = 2 x keypoints, regressed with MSE. The blocks are numbered
    through all stages (blocks.0 .. blocks.7), as brisk numbers them."""

    def __init__(self, outputs=34):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, outputs)

    def loss(self, x, y):
        h = self.blocks(self.stem(x)).mean(dim=(2, 3))
        return F.mse_loss(self.head(h), y)


# ---------------------------------------------------------------- meshgnn

def mlp(cin, latent, norm=True):
    """Every update of the mesh GNN: Linear, SiLU, Linear, then LayerNorm (not on the output)."""
    layers = [nn.Linear(cin, latent), nn.SiLU(), nn.Linear(latent, latent)]
    if norm:
        layers.append(nn.LayerNorm(latent))
    return nn.Sequential(*layers)


def nearest(src_xy, dst_xy, k):
    """For each row of src_xy, the indices of the k nearest rows of dst_xy. Ties among equal
    distances fall as float32 rounding makes them; brisk breaks them by index, so the
    equivalence test loads brisk's graph into the buffers instead of comparing graphs."""
    d = torch.cdist(src_xy, dst_xy)
    return d.topk(k, largest=False).indices


def grid_xy(n, offset=0.0):
    """Positions of an n x n grid in the unit square, row-major, x the column: (i + offset) / n."""
    i = (torch.arange(n, dtype=torch.float32) + offset) / n
    gy, gx = torch.meshgrid(i, i, indexing="ij")
    return torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1)


class Interaction(nn.Module):
    """One message-passing layer: edge update from [edge, source node, destination node], node
    update from [node, sum of its incoming edges], both residual."""

    def __init__(self, latent):
        super().__init__()
        self.edge = mlp(3 * latent, latent)
        self.node = mlp(2 * latent, latent)

    def forward(self, e, hs, hd, src, dst):
        e = e + self.edge(torch.cat([e, hs[:, src], hd[:, dst]], dim=-1))
        agg = torch.zeros_like(hd).index_add_(1, dst, e)
        return e, hd + self.node(torch.cat([hd, agg], dim=-1))


class MeshGNN(nn.Module):
    """Encode-process-decode forecaster: grid fields are encoded onto a coarser mesh (each grid
    node sends to its 4 nearest mesh nodes), processed by message passing on the mesh (each
    mesh node hears its 8 nearest neighbours), and decoded back along the reversed grid-mesh
    edges to the next-step change of each output variable. Edge features: the offset (dx, dy)
    and its length."""

    def __init__(self, grid=64, mesh=32, latent=256, layers=16, fin=20, fout=8):
        super().__init__()
        gxy, mxy = grid_xy(grid), grid_xy(mesh, 0.5)
        g2m_mesh = nearest(gxy, mxy, 4)                       # grid node -> 4 mesh nodes
        g2m_src = torch.arange(grid * grid).repeat_interleave(4)
        g2m_dst = g2m_mesh.reshape(-1)
        mm = nearest(mxy, mxy, 9)[:, 1:]                      # 8 neighbours, self excluded
        mm_dst = torch.arange(mesh * mesh).repeat_interleave(8)
        mm_src = mm.reshape(-1)
        # The mesh-to-grid edges are the grid-to-mesh ones reversed. The same tensors serve
        # both; check_torch.py replaces each buffer with its own copy of brisk's graph.
        for name, t in (("g2m_src", g2m_src), ("g2m_dst", g2m_dst), ("mm_src", mm_src),
                        ("mm_dst", mm_dst), ("m2g_src", g2m_dst), ("m2g_dst", g2m_src)):
            self.register_buffer(name, t)

        def efeat(a, b):
            d = b - a
            return torch.cat([d, d.norm(dim=1, keepdim=True)], dim=1)

        self.register_buffer("g2m_f", efeat(gxy[g2m_src], mxy[g2m_dst]))
        self.register_buffer("mm_f", efeat(mxy[mm_src], mxy[mm_dst]))
        self.register_buffer("m2g_f", efeat(mxy[g2m_dst], gxy[g2m_src]))
        self.register_buffer("mesh_f", mxy)
        self.grid_embed, self.mesh_embed = mlp(fin, latent), mlp(2, latent)
        self.g2m_embed, self.mm_embed, self.m2g_embed = mlp(3, latent), mlp(3, latent), mlp(3, latent)
        self.encoder = Interaction(latent)
        self.grid_update = mlp(latent, latent)
        self.processor = nn.ModuleList(Interaction(latent) for _ in range(layers))
        self.decoder = Interaction(latent)
        self.out = mlp(latent, fout, norm=False)

    def loss(self, x, y):
        B = x.shape[0]
        g = self.grid_embed(x)
        m = self.mesh_embed(self.mesh_f).expand(B, -1, -1)
        e = self.g2m_embed(self.g2m_f).expand(B, -1, -1)
        _, m = self.encoder(e, g, m, self.g2m_src, self.g2m_dst)
        g = g + self.grid_update(g)
        e = self.mm_embed(self.mm_f).expand(B, -1, -1)
        for layer in self.processor:
            e, m = layer(e, m, m, self.mm_src, self.mm_dst)
        e = self.m2g_embed(self.m2g_f).expand(B, -1, -1)
        _, g = self.decoder(e, m, g, self.m2g_src, self.m2g_dst)
        return F.mse_loss(self.out(g), y)
