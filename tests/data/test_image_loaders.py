"""Image loaders on real bundled data (digits, Debian Fashion-MNIST when installed)
and on small files written here in each dataset's exact on-disk format."""

import gzip
import pickle
import struct

import numpy as np
import pytest

from zoprivacy.data.loaders import (
  MissingDataError,
  load_cifar10,
  load_digits,
  load_fashion_mnist,
  load_tiny_imagenet,
)
from zoprivacy.data.loaders.fashion_mnist import DEBIAN_DIR
from zoprivacy.data.loaders.idx import (
  IDXFormatError,
  parse_idx,
  read_idx,
  write_idx,
)


def test_digits_shapes_range_and_split():
  s = load_digits(test_fraction=0.2, seed=0)
  assert (
    s.train.inputs.shape[1:] == (8, 8, 1) and s.train.inputs.dtype == np.float32
  )
  assert len(s.train) + len(s.test) == 1797
  assert s.train.inputs.min() == 0.0 and s.train.inputs.max() == 1.0
  assert s.train.num_classes == 10 and set(np.unique(s.test.labels)) == set(
    range(10)
  )
  # each image by a coin of its own (tests/data/test_loader_splits.py): the
  # test part of every class is binomial, within 5 standard deviations
  n = s.train.class_counts() + s.test.class_counts()
  sd = np.sqrt(n * 0.2 * 0.8)
  assert np.all(np.abs(s.test.class_counts() - 0.2 * n) < 5 * sd)
  assert (len(s.train), len(s.test)) == (1431, 366)  # seed 0, documented
  s2 = load_digits(test_fraction=0.2, seed=0, dtype=np.float64)
  np.testing.assert_array_equal(s.test.labels, s2.test.labels)


def test_digits_are_scikit_learns_without_importing_it(monkeypatch):
  """The bundled file read directly is ``sklearn.datasets.load_digits``;
  where the file is not found, scikit-learn loads it."""
  from sklearn.datasets import load_digits as sk_load_digits

  from zoprivacy.data.loaders import digits

  images, targets = digits._bundled_digits()
  raw = sk_load_digits()
  np.testing.assert_array_equal(images, raw.images)
  np.testing.assert_array_equal(targets, raw.target)
  monkeypatch.setattr(digits.os.path, "exists", lambda path: False)
  again, _ = digits._bundled_digits()
  np.testing.assert_array_equal(again, raw.images)


def _write_fashion(tmp_path, n_train=12, n_test=5, gz=True):
  rng = np.random.default_rng(0)
  d = tmp_path / "fashion-mnist"
  d.mkdir()
  arrays = {}
  for prefix, n in (("train", n_train), ("t10k", n_test)):
    imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(n,), dtype=np.uint8)
    suffix = ".gz" if gz else ""
    write_idx(d / f"{prefix}-images-idx3-ubyte{suffix}", imgs)
    write_idx(d / f"{prefix}-labels-idx1-ubyte{suffix}", labels)
    arrays[prefix] = (imgs, labels)
  return d, arrays


def test_idx_header_is_parsed_exactly(tmp_path):
  imgs = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
  write_idx(tmp_path / "x-idx3-ubyte.gz", imgs)
  raw = gzip.decompress((tmp_path / "x-idx3-ubyte.gz").read_bytes())
  # magic 0x00000803, then dims as big-endian uint32: 16-byte header for idx3
  assert raw[:4] == b"\x00\x00\x08\x03"
  assert struct.unpack(">III", raw[4:16]) == (2, 3, 4) and len(raw) == 16 + 24
  np.testing.assert_array_equal(read_idx(tmp_path / "x-idx3-ubyte.gz"), imgs)
  labels = np.array([1, 2, 3], dtype=np.uint8)
  write_idx(tmp_path / "y", labels)
  assert (tmp_path / "y").read_bytes()[
    :8
  ] == b"\x00\x00\x08\x01\x00\x00\x00\x03"
  # non-byte types are big-endian on disk
  ints = np.array([[1, -2], [300, 70000]], dtype=np.int32)
  write_idx(tmp_path / "z", ints)
  np.testing.assert_array_equal(read_idx(tmp_path / "z"), ints)


@pytest.mark.parametrize(
  "data,match",
  [
    (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "two zero bytes"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "unknown IDX type"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x02\x05", "needs 2 data bytes"),
    (b"\x00\x00\x08\x02\x00\x00\x00\x01", "truncated header"),
  ],
)
def test_idx_rejects_malformed(data, match):
  with pytest.raises(IDXFormatError, match=match):
    parse_idx(data)


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_synthetic(tmp_path, gz):
  d, arrays = _write_fashion(tmp_path, gz=gz)
  for data_dir in (tmp_path, d):  # parent folder or dataset folder
    s = load_fashion_mnist(data_dir)
    assert s.train.inputs.shape == (
      12,
      28,
      28,
      1,
    ) and s.test.inputs.shape == (5, 28, 28, 1)
    np.testing.assert_allclose(
      s.train.inputs[..., 0] * 255, arrays["train"][0], atol=1e-4
    )
    np.testing.assert_array_equal(s.test.labels, arrays["t10k"][1])
  raw = load_fashion_mnist(d, dtype=np.uint8)
  np.testing.assert_array_equal(raw.train.inputs[..., 0], arrays["train"][0])


def test_fashion_mnist_missing_files_named(tmp_path):
  d, _ = _write_fashion(tmp_path)
  (d / "t10k-labels-idx1-ubyte.gz").unlink()
  with pytest.raises(MissingDataError) as e:
    load_fashion_mnist(d)
  assert isinstance(e.value, FileNotFoundError)
  assert [p.endswith("t10k-labels-idx1-ubyte.gz") for p in e.value.missing] == [
    True
  ]
  assert "dataset-fashion-mnist" in str(e.value)


def test_fashion_mnist_label_count_mismatch(tmp_path):
  d, _ = _write_fashion(tmp_path)
  write_idx(d / "train-labels-idx1-ubyte.gz", np.zeros(3, np.uint8))
  with pytest.raises(IDXFormatError, match="12 images but 3 labels"):
    load_fashion_mnist(d)


@pytest.mark.skipif(
  not (DEBIAN_DIR / "train-images-idx3-ubyte.gz").exists(),
  reason="Debian package dataset-fashion-mnist not installed",
)
def test_fashion_mnist_real_debian_files():
  s = load_fashion_mnist()
  assert s.train.inputs.shape == (
    60000,
    28,
    28,
    1,
  ) and s.test.inputs.shape == (10000, 28, 28, 1)
  np.testing.assert_array_equal(s.train.class_counts(), [6000] * 10)
  np.testing.assert_array_equal(s.test.class_counts(), [1000] * 10)
  assert 0.25 < s.train.inputs.mean() < 0.32  # published pixel mean 0.286


def _write_cifar(root, n_per_batch=4):
  rng = np.random.default_rng(1)
  d = root / "cifar-10-batches-py"
  d.mkdir()
  names = [
    b"airplane",
    b"automobile",
    b"bird",
    b"cat",
    b"deer",
    b"dog",
    b"frog",
    b"horse",
    b"ship",
    b"truck",
  ]
  with open(d / "batches.meta", "wb") as f:
    pickle.dump(
      {
        b"num_cases_per_batch": n_per_batch,
        b"label_names": names,
        b"num_vis": 3072,
      },
      f,
      protocol=2,
    )
  batches = {}
  for fname in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
    data = rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8)
    labels = [int(x) for x in rng.integers(0, 10, size=n_per_batch)]
    batch = {
      b"batch_label": fname.encode(),
      b"labels": labels,
      b"data": data,
      b"filenames": [f"img_{i}.png".encode() for i in range(n_per_batch)],
    }
    with open(d / fname, "wb") as f:
      pickle.dump(batch, f, protocol=2)
    batches[fname] = (data, labels)
  return d, batches


def test_cifar10_pickle_batches(tmp_path):
  d, batches = _write_cifar(tmp_path)
  s = load_cifar10(tmp_path)
  assert s.train.inputs.shape == (20, 32, 32, 3) and s.test.inputs.shape == (
    4,
    32,
    32,
    3,
  )
  assert s.train.class_names[0] == "airplane" and s.train.num_classes == 10
  # channel planes: row 0 of the R plane is the first 32 bytes
  data, labels = batches["data_batch_1"]
  raw = load_cifar10(d, dtype=np.uint8)
  np.testing.assert_array_equal(raw.train.inputs[0, 0, :, 0], data[0, :32])
  np.testing.assert_array_equal(
    raw.train.inputs[0, 0, :, 1], data[0, 1024:1056]
  )
  np.testing.assert_array_equal(
    raw.train.inputs[0, 1, 0, 2], data[0, 2048 + 32]
  )
  np.testing.assert_array_equal(raw.train.labels[:4], labels)
  np.testing.assert_array_equal(raw.test.labels, batches["test_batch"][1])
  np.testing.assert_allclose(
    s.train.inputs, raw.train.inputs / 255.0, atol=1e-6
  )


def test_cifar10_missing_batches_named(tmp_path):
  d, _ = _write_cifar(tmp_path)
  (d / "data_batch_3").unlink()
  (d / "test_batch").unlink()
  with pytest.raises(MissingDataError) as e:
    load_cifar10(tmp_path)
  assert sorted(p.rsplit("/", 1)[-1] for p in e.value.missing) == [
    "data_batch_3",
    "test_batch",
  ]
  assert "cifar-10-python.tar.gz" in str(e.value)


def test_cifar10_refuses_code_in_pickle(tmp_path):
  d, _ = _write_cifar(tmp_path)

  class Evil:
    def __reduce__(self):
      return (print, ("pwned",))

  with open(d / "data_batch_2", "wb") as f:
    pickle.dump({b"data": Evil(), b"labels": []}, f)
  with pytest.raises(pickle.UnpicklingError, match="builtins.print"):
    load_cifar10(d)


def test_tiny_imagenet_layout(tmp_path):
  Image = pytest.importorskip("PIL.Image")
  root = tmp_path / "tiny-imagenet-200"
  wnids = ["n01443537", "n01629819", "n01641577"]
  (root / "val" / "images").mkdir(parents=True)
  (root / "wnids.txt").write_text("\n".join(wnids) + "\n")
  (root / "words.txt").write_text(
    "n01443537\tgoldfish, Carassius auratus\n"
    "n01629819\tEuropean fire salamander\n"
    "n01641577\tbullfrog\nn00000001\tunused\n"
  )
  colors = {w: (40 * i + 20, 200 - 50 * i, 90) for i, w in enumerate(wnids)}
  for w in wnids:
    (root / "train" / w / "images").mkdir(parents=True)
    (root / "train" / w / f"{w}_boxes.txt").write_text("")
    for k in range(2):
      Image.new("RGB", (64, 64), colors[w]).save(
        root / "train" / w / "images" / f"{w}_{k}.JPEG",
        format="JPEG",
        quality=95,
      )
  # a grey-scale validation image, as some real Tiny-ImageNet files are
  Image.new("L", (64, 64), 128).save(
    root / "val" / "images" / "val_0.JPEG", format="JPEG"
  )
  Image.new("RGB", (64, 64), colors[wnids[2]]).save(
    root / "val" / "images" / "val_1.JPEG", format="JPEG", quality=95
  )
  (root / "val" / "val_annotations.txt").write_text(
    f"val_0.JPEG\t{wnids[1]}\t0\t0\t63\t63\nval_1.JPEG\t{wnids[2]}\t1\t2\t30\t40\n"
  )
  s = load_tiny_imagenet(tmp_path)
  assert s.train.inputs.shape == (6, 64, 64, 3) and s.test.inputs.shape == (
    2,
    64,
    64,
    3,
  )
  np.testing.assert_array_equal(s.train.labels, [0, 0, 1, 1, 2, 2])
  np.testing.assert_array_equal(s.test.labels, [1, 2])
  assert (
    s.train.class_names[0].startswith("goldfish") and s.train.num_classes == 3
  )
  mean_color = s.train.inputs[2].reshape(-1, 3).mean(0) * 255
  np.testing.assert_allclose(mean_color, colors[wnids[1]], atol=3)
  np.testing.assert_allclose(s.test.inputs[0] * 255, 128, atol=2)  # grey -> RGB
  assert len(load_tiny_imagenet(root, max_per_class=1).train) == 3

  (root / "val" / "images" / "val_1.JPEG").unlink()
  with pytest.raises(MissingDataError, match="val_1.JPEG"):
    load_tiny_imagenet(root)


def test_tiny_imagenet_missing(tmp_path):
  with pytest.raises(MissingDataError) as e:
    load_tiny_imagenet(tmp_path)
  assert any(p.endswith("wnids.txt") for p in e.value.missing)
  assert "tiny-imagenet-200.zip" in str(e.value)


def test_cifar10_found_through_env_var(tmp_path, monkeypatch):
  _write_cifar(tmp_path)
  monkeypatch.setenv("ZOPRIVACY_DATA_DIR", str(tmp_path))
  assert len(load_cifar10().train) == 20
  monkeypatch.setenv("ZOPRIVACY_DATA_DIR", str(tmp_path / "elsewhere"))
  with pytest.raises(MissingDataError, match="elsewhere"):
    load_cifar10()
