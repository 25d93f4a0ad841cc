"""A distribution-free confidence interval of a median: the sign test's order statistics.
Shared by paired_summary.py and hotpath.sh."""
import math


def sign_test_ci(d, level=0.90):
    """Order statistics bounding the median of d with at least `level` coverage."""
    d, n = sorted(d), len(d)
    k = 0
    while k + 1 <= n // 2:
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        if 2 * tail > 1 - level:
            break
        k += 1
    return (d[k - 1], d[n - k]) if k > 0 else (d[0], d[-1])
