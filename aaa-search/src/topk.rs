//! Keeping the `k` best scored items of a stream.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// A scored item. Higher score is better; on equal scores the smaller key is better, so
/// results do not depend on the order items arrive in.
#[derive(Debug, Clone, Copy)]
struct Entry<K> {
    score: f32,
    key: K,
}

impl<K: Ord> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord> Eq for Entry<K> {}

impl<K: Ord> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.key.cmp(&self.key))
    }
}

/// The `k` best items pushed so far (a min-heap of size `k`).
#[derive(Debug)]
pub(crate) struct TopK<K> {
    k: usize,
    heap: BinaryHeap<Reverse<Entry<K>>>,
}

impl<K: Ord> TopK<K> {
    /// Keeps at most `k` items.
    pub(crate) fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.min(4096) + 1),
        }
    }

    /// Offers an item. NaN scores are ignored.
    #[inline]
    pub(crate) fn push(&mut self, score: f32, key: K) {
        if self.k == 0 || score.is_nan() {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(Reverse(Entry { score, key }));
            return;
        }
        let entry = Entry { score, key };
        if let Some(mut worst) = self.heap.peek_mut()
            && entry > worst.0
        {
            worst.0 = entry;
        }
    }

    /// The lowest score kept, once `k` items are kept: anything scoring below it will
    /// not get in.
    #[inline]
    pub(crate) fn threshold(&self) -> Option<f32> {
        if self.heap.len() < self.k {
            None
        } else {
            self.heap.peek().map(|e| e.0.score)
        }
    }

    /// The kept items, best first.
    pub(crate) fn into_sorted(self) -> Vec<(f32, K)> {
        let mut items: Vec<Entry<K>> = self.heap.into_iter().map(|e| e.0).collect();
        items.sort_by(|a, b| b.cmp(a));
        items.into_iter().map(|e| (e.score, e.key)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_in_order_with_ties_broken_by_key() {
        let mut top = TopK::new(3);
        for (score, key) in [(1.0, 5), (3.0, 1), (2.0, 9), (3.0, 0), (0.5, 2), (2.0, 3)] {
            top.push(score, key);
        }
        assert_eq!(top.threshold(), Some(2.0));
        assert_eq!(top.into_sorted(), vec![(3.0, 0), (3.0, 1), (2.0, 3)]);
    }

    #[test]
    fn zero_k_and_nan_keep_nothing() {
        let mut top = TopK::new(0);
        top.push(1.0, 1);
        assert!(top.into_sorted().is_empty());
        let mut top = TopK::new(2);
        top.push(f32::NAN, 1);
        assert_eq!(top.threshold(), None);
        assert!(top.into_sorted().is_empty());
    }
}
