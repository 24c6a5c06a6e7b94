"""torchvision's ResNet-18 with a new head (train_onnx.py's group "resnet"): the network users
fine-tune most, exported as torchvision builds it (its BatchNorms in training mode, the
residual adds, max pooling, global average pooling), over 32x32 images into 5 classes, 8
samples at SGD lr 1e-5. BatchNorm over 8 samples makes fp32 itself inexact here: measured,
PyTorch's fp32 losses drift 1.8e-3 to 2.0e-3 from its fp64 ones over the 50 steps while
brisk's stay within 2e-4 to 5e-4 of fp64 (the CPU's GEMM choices vary the sums), so the
harness's bound (twice PyTorch's own fp32 drift) decides.
Skipped without python3-torchvision."""


def cases(torch, Case):
    try:
        import torchvision
    except ImportError:
        print("SKIP: resnet18: torchvision is not installed (python3-torchvision)")
        return []
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None)
    net.fc = torch.nn.Linear(net.fc.in_features, 5)  # the new head
    return [Case("resnet18", net, [3, 32, 32], classes=5, n=8, lr=1e-5)]
