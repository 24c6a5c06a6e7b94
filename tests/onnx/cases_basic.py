"""The first imported modules (train_onnx.py's group "basic"): an MLP with LayerNorm, a CNN
with batch norm, max pooling and dropout, and a module of slices, constant-index gathers and
splits, and one of average pooling and constant pads."""


def cases(torch, Case):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 16)
            self.norm = nn.LayerNorm(16)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(torch.tanh(self.norm(torch.relu(self.fc1(x)))))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(2)
            self.drop = nn.Dropout(0.0)
            self.head = nn.Linear(16, 5)

        def forward(self, x):
            y = self.drop(self.pool(torch.relu(self.bn(self.conv(x)))))
            return self.head(y.reshape(x.shape[0], -1))

    class Picks(nn.Module):  # Slice, Gather with constant indices, Split of tensors
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 8)
            self.head = nn.Linear(5 + 8 + 4 + 12 + 3, 3)

        def forward(self, x):  # x [N, 5, 4]
            h = torch.tanh(self.fc(x))              # [N, 5, 8]
            a, b = torch.split(h, [3, 5], dim=2)    # Split
            last = x[:, -1]                         # Gather, a scalar index
            mid = x[:, 1:4].reshape(x.shape[0], 12)  # Slice
            return self.head(torch.cat([b[:, 0], h[:, 2], last, mid, a[:, 0]], dim=1))

    class Pools(nn.Module):  # AvgPool2d (torch exports a Pad before it), padding of a value, a crop
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.pool = nn.AvgPool2d(2)
            self.pad = nn.ConstantPad2d((1, 0, 2, 1), 0.5)
            self.head = nn.Linear(3 * 5 * 3, 4)

        def forward(self, x):  # x [N, 2, 4, 4]
            y = self.pad(self.pool(torch.tanh(self.conv(x))))  # [N, 3, 5, 3]
            y = torch.nn.functional.pad(y, (0, 0, -1, 1))       # a crop and a zero pad
            return self.head(y.reshape(x.shape[0], -1))

    return [Case("mlp", MLP(), [6], classes=3), Case("cnn", CNN(), [2, 4, 4], classes=5),
            Case("picks", Picks(), [5, 4], classes=3), Case("pools", Pools(), [2, 4, 4], classes=4)]
