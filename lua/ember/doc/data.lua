-- API reference: ember.data (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.data`: data sets and loaders

IDX files (MNIST's format), Fashion-MNIST from the Debian package
`dataset-fashion-mnist`, tensors as data sets, and a batching loader with
reproducible shuffling. Details: docs/io_data.md.

### `ember.data.fashion_mnist(split, dir?)`
The `"train"` (60000) or `"test"` (10000) split: `x` float32 `{N, 1, 28, 28}`
in [0, 1], `y` int64 labels 1..10. Looks in `dir`, `$EMBER_DATA_DIR`, then
the Debian package's folder.

### `ember.data.DEFAULT_FASHION_MNIST_DIR`
Where the Debian package puts the files (`/usr/share/datasets/fashion-mnist`).

### `ember.data.mnist_idx(images_path, labels_path)`
A data set from any IDX pair (gzip'd or plain): uint8 images scaled to
[0, 1] as `{N, 1, H, W}`, labels as int64 raw + 1.

### `ember.data.TensorDataset(x, y?)`
A data set over tensors whose first dim indexes samples: `#ds`, `ds:get(i)`,
`ds.x`, `ds.y`.

### `ember.data.DataLoader(ds, opts?)`
Batches of a data set: `for x, y in loader:iter() do ... end`;
`opts = {batch_size = 1, shuffle = false, drop_last = false, seed,
generator, distributed = false, pin_memory = false}`; `#loader` is the number of
batches. A shuffling loader without a seed draws one from `generator` (an
`ember.Generator`) or else from the default generator. With `pin_memory`, CPU batches come in pinned memory (for
`x:to("cuda", {non_blocking = true})`) where CUDA can be used, and as
ordinary tensors where it cannot (as PyTorch's loader does).

### `ember.data.permutation(n, seed, epoch)`
The 1-based int64 permutation of `1..n` a shuffling loader uses for that
seed and epoch (splitmix64 Fisher-Yates; same on every platform).

## `ember.data.DataLoader_class`: what DataLoader returns

### `DataLoader:iter()`
An iterator over one epoch of `x, y` batches (views in order, or gathered
copies when shuffled).

### `DataLoader:set_epoch(epoch)`
The epoch whose order the next `iter()` uses.

### `DataLoader:size()`
The number of batches (as `#loader`).

## `ember.data.TensorDataset_class`: what TensorDataset returns

### `TensorDataset:get(i)`
Sample `i`: views `x[i]` and `y[i]` (0-d for labels).

### `TensorDataset:size()`
The number of samples (as `#ds`).
]==]
