"""Vision modules (train_onnx.py's group "vision"): a small U-Net (convolutions and max
pooling down, a grouped, padded transposed convolution with output padding and a nearest and a
bilinear upsampling up, skips by concatenation; mean squared error against an image), a 1-D
CNN over series (a dilated transposed convolution) and an image classifier with batch norm
and dropout."""


def cases(torch, Case):
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1, self.down2, self.mid = block(2, 4), block(4, 8), block(8, 8)
            self.pool = nn.MaxPool2d(2)
            self.up2 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1, groups=2)
            self.dec2 = block(16, 4)
            self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
            self.dec1 = block(8, 4)
            self.smooth = nn.Upsample(scale_factor=2, mode="bilinear")
            self.out = nn.Conv2d(4, 1, 3, padding=1, stride=2)

        def forward(self, x):  # x [N, 2, 8, 8]
            a = self.down1(x)                          # [N, 4, 8, 8]
            b = self.down2(self.pool(a))               # [N, 8, 4, 4]
            m = self.mid(self.pool(b))                 # [N, 8, 2, 2]
            d2 = self.dec2(torch.cat([self.up2(m), b], 1))  # [N, 4, 4, 4]
            d1 = self.dec1(torch.cat([self.up1(d2), a], 1))  # [N, 4, 8, 8]
            return self.out(self.smooth(d1))           # [N, 1, 8, 8]

    class Series(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv1d(2, 6, 5, padding=2), nn.BatchNorm1d(6)
            self.conv2, self.bn2 = nn.Conv1d(6, 8, 3, padding=1), nn.BatchNorm1d(8)
            self.pool = nn.MaxPool1d(2)
            self.up = nn.ConvTranspose1d(8, 4, 3, stride=2, padding=2, output_padding=1, dilation=2)
            self.head = nn.Linear(4 * 8, 3)

        def forward(self, x):  # x [N, 2, 16]
            y = self.pool(torch.relu(self.bn1(self.conv1(x))))   # [N, 6, 8]
            y = self.pool(torch.relu(self.bn2(self.conv2(y))))   # [N, 8, 4]
            y = self.up(y)                                        # [N, 4, 8]
            return self.head(y.flatten(1))

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            self.drop = nn.Dropout(0.0)
            self.head = nn.Linear(12, 4)

        def forward(self, x):  # x [N, 3, 8, 8]
            return self.head(self.drop(torch.flatten(self.features(x), 1)))

    return [Case("unet", UNet(), [2, 8, 8], target=[1, 8, 8]), Case("series", Series(), [2, 16], classes=3),
            Case("classifier", Classifier(), [3, 8, 8], classes=4)]


def refused(torch):
    """Resizes brisk's upsampling cannot do: corners aligned, a factor that is not an integer."""
    nn = torch.nn
    return [("aligned", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), [2, 4, 4],
             ["(Resize)", "coordinate_transformation_mode align_corners", "half_pixel"]),
            ("fraction", nn.Upsample(scale_factor=1.5, mode="nearest"), [2, 4, 4],
             ["(Resize)", "integer factors"])]
