"""Recurrent modules (train_onnx.py's group "recurrent"): regressors over a series [N, T, F]
of torch.nn.LSTM and torch.nn.GRU, their last step (Y) or last state (Y_h) into a Linear; a
bidirectional two-layer LSTM."""


def cases(torch, Case):
    nn = torch.nn

    class LastStep(nn.Module):  # Y: the last step's output
        def __init__(self, kind, layers=1, bidirectional=False):
            super().__init__()
            self.rnn = getattr(nn, kind)(3, 8, num_layers=layers, batch_first=True, bidirectional=bidirectional)
            self.fc = nn.Linear(16 if bidirectional else 8, 1)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.fc(y[:, -1])

    class LastState(nn.Module):  # Y_h: the last hidden state
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 8, batch_first=True)
            self.fc = nn.Linear(8, 1)

        def forward(self, x):
            _, h = self.rnn(x)
            return self.fc(h[-1])

    return [Case("lstm", LastStep("LSTM"), [6, 3], target=[1]), Case("gru", LastStep("GRU"), [6, 3], target=[1]),
            Case("gru_state", LastState(), [6, 3], target=[1]),
            Case("bilstm", LastStep("LSTM", 2, True), [6, 3], target=[1])]


def refused(torch):
    """What brisk's fused LSTM and GRU ops cannot take: the last cell state read, initial
    states that are not zeros."""
    nn = torch.nn

    class CellState(nn.Module):  # Y_c read: brisk's LSTM keeps only h
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(3, 8, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[1][1][-1]

    class OnesState(nn.Module):  # initial_h and initial_c of ones
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 8, batch_first=True)

        def forward(self, x):
            return self.rnn(x, torch.ones(1, x.shape[0], 8))[0]

    return [("cell_state", CellState(), [6, 3], ["'/rnn/LSTM' (LSTM)", "Y_c is read", "take Y or Y_h"]),
            ("ones_state", OnesState(), [6, 3], ["(GRU)", "initial_h of other values", "constant zeros taken"])]
