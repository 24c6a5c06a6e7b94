"""Transformer-style modules (train_onnx.py's group "transformer"): an MLP with a LayerNorm
written out in elementwise ops and GELU (Erf), a two-layer nn.TransformerEncoder (batched
MatMul, Softmax, the attention's reshapes), an embedding + MLP, and a module of Clip, Where,
Expand, ReduceSum and Pow on tensors."""


def cases(torch, Case):
    nn = torch.nn

    class NormGelu(nn.Module):  # ReduceMean, Sub, Pow, Sqrt, Div, Erf
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 16)
            self.g = nn.Parameter(torch.linspace(0.5, 1.5, 16))
            self.b = nn.Parameter(torch.linspace(-0.2, 0.2, 16))
            self.act = nn.GELU()
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            h = self.fc1(x)
            m = h.mean(-1, keepdim=True)
            v = (h - m).pow(2).mean(-1, keepdim=True)
            h = (h - m) / torch.sqrt(v + 1e-5) * self.g + self.b
            return self.fc2(self.act(h))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(16, 4)

        def forward(self, x):  # x [N, 6, 16]
            return self.head(self.enc(x).mean(1))

    class EmbedMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.fc1 = nn.Linear(5 * 8, 16)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, ids):  # ids [N, 5]
            return self.fc2(torch.relu(self.fc1(self.emb(ids).flatten(1))))

    class Gates(nn.Module):  # Clip, Where (a -inf fill), Expand, ReduceSum, Exp, Abs, Neg, Log, Softmax on axis 1
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.w = nn.Parameter(torch.randn(3, 4, 4) * 0.5)
            self.scale = nn.Parameter(torch.ones(1, 4))
            self.head = nn.Linear(3 * 4 + 4 + 4, 3)

        def forward(self, x):  # x [N, 3, 4]
            n = x.shape[0]
            h = self.fc(x).clamp(-1.0, 1.5)
            keep = torch.tensor([[1.0, 0.0, 1.0, 1.0]]) > 0.5
            h = torch.where(keep, h, -h)
            b = torch.matmul(h.unsqueeze(2), self.w).squeeze(2)               # [N, 3, 1, 4] @ [3, 4, 4]
            rows = torch.tensor([[True], [False], [True]])
            p = torch.softmax(b.masked_fill(~rows, float("-inf")), dim=1)     # [N, 3, 4]
            s = torch.exp(-torch.abs(h)).sum(1)                               # [N, 4]
            t = torch.log(1.0 + (self.scale.expand(n, 4) * s) ** 2)           # [N, 4]
            return self.head(torch.cat([p.reshape(n, 12), s, t], dim=1))

    return [Case("norm_gelu", NormGelu(), [6], classes=3), Case("encoder", Encoder(), [6, 16], classes=4),
            Case("embed_mlp", EmbedMLP(), [5], classes=3, vocab=20), Case("gates", Gates(), [3, 4], classes=3)]
