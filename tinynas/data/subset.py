"""Representative subsets of windows: a cheap data proxy that keeps every mode of every class.

Windows are described by cheap signal features (per-channel log RMS and log energy in a few
frequency bands); within each class the features are clustered (k-means, seeded) and the window
nearest each centroid is kept, so every cluster of every class has a representative.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinynas.data.windows import DataError, Windows

BANDS = 4


def window_features(x: np.ndarray, bands: int = BANDS) -> np.ndarray:
    """(n, channels * (1 + bands)) features: log RMS and log band energies per channel, standardised."""
    x = np.asarray(x, dtype=np.float64)
    rms = np.sqrt(np.mean(x ** 2, axis=1))                       # (n, C)
    spectrum = np.abs(np.fft.rfft(x - x.mean(axis=1, keepdims=True), axis=1)) ** 2  # (n, F, C)
    edges = np.unique(np.geomspace(1, spectrum.shape[1], bands + 1).astype(int))
    energies = np.stack([spectrum[:, a:b].sum(axis=1) for a, b in zip(edges[:-1], edges[1:])], axis=1)
    features = np.concatenate([np.log1p(rms), np.log1p(energies.reshape(len(x), -1))], axis=1)
    spread = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(spread > 0, spread, 1.0)


def cluster_within_classes(windows: Windows, indices: Sequence[int] | np.ndarray, fraction: float,
                           seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cluster each class's windows into about `fraction` x its size clusters (k-means++, seeded).

    Returns (cluster of each window of `indices`, centroids, features); clusters are numbered
    class by class.
    """
    from scipy.cluster.vq import kmeans2

    if not 0 < fraction <= 1:
        raise DataError(f"subset fraction must be in (0, 1], got {fraction}")
    indices = np.asarray(indices, dtype=int)
    features = window_features(windows.x[indices])
    labels = np.empty(len(indices), dtype=int)
    centroids: list[np.ndarray] = []
    for label in np.unique(windows.y[indices]):
        members = np.flatnonzero(windows.y[indices] == label)
        clusters = min(len(members), max(1, int(round(fraction * len(members)))))
        if clusters == len(members):
            found, assignment = features[members], np.arange(len(members))
        else:
            found, assignment = kmeans2(features[members], clusters, minit="++", seed=seed)
        labels[members] = len(centroids) + assignment
        centroids += list(found)
    return labels, np.array(centroids), features


def representative_subset(windows: Windows, indices: Sequence[int] | np.ndarray, fraction: float,
                          seed: int = 0) -> np.ndarray:
    """Indices (a subset of `indices`): the window nearest each cluster centre of each class."""
    indices = np.asarray(indices, dtype=int)
    labels, centroids, features = cluster_within_classes(windows, indices, fraction, seed)
    keep = []
    for cluster, centre in enumerate(centroids):
        inside = np.flatnonzero(labels == cluster)
        if len(inside):  # k-means can leave a cluster empty: then there is no mode to represent
            keep.append(inside[np.argmin(np.linalg.norm(features[inside] - centre, axis=1))])
    return np.sort(indices[np.array(keep, dtype=int)])
