"""The first imported modules (train_onnx.py's group "basic"): an MLP with LayerNorm, a CNN
with batch norm, max pooling and dropout."""


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

    return [Case("mlp", MLP(), [6], classes=3), Case("cnn", CNN(), [2, 4, 4], classes=5)]
