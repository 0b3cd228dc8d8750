//! The HNSW graph over the store's rows (with the `hnsw` feature).

use hnsw_rs::anndists::dist::Distance;
use hnsw_rs::hnsw::Hnsw;

use super::{HnswParams, dot};

/// `1 - cosine` for unit vectors, clamped at 0: rounding can make the dot product
/// of a vector with itself exceed 1, which `hnsw_rs`'s own `DistDot` asserts
/// against.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct UnitCosine;

impl Distance<f32> for UnitCosine {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - dot(a, b)).max(0.0)
    }
}

/// The graph and the map between its node ids ("slots") and store rows. Rows move
/// when documents are deleted; slots never do.
pub(super) struct Ann {
    params: HnswParams,
    graph: Hnsw<'static, f32, UnitCosine>,
    /// The slot of each row.
    slot_of_row: Vec<usize>,
    /// The row of each slot; `None` for a replaced or deleted vector.
    row_of_slot: Vec<Option<usize>>,
    dead: usize,
}

impl std::fmt::Debug for Ann {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ann")
            .field("params", &self.params)
            .field("live", &self.slot_of_row.len())
            .field("dead", &self.dead)
            .finish()
    }
}

impl Ann {
    pub(super) fn new(params: HnswParams) -> Self {
        Ann {
            params,
            graph: Self::graph(params, 0),
            slot_of_row: Vec::new(),
            row_of_slot: Vec::new(),
            dead: 0,
        }
    }

    fn graph(params: HnswParams, capacity: usize) -> Hnsw<'static, f32, UnitCosine> {
        Hnsw::new(
            params.max_connections,
            capacity.max(1024),
            params.max_layers,
            params.ef_construction,
            UnitCosine,
        )
    }

    /// Points `row` at a new node holding `vector` (masking its old node, if any).
    pub(super) fn set_row(&mut self, row: usize, vector: &[f32]) {
        let slot = self.row_of_slot.len();
        self.row_of_slot.push(Some(row));
        if row < self.slot_of_row.len() {
            let old = std::mem::replace(&mut self.slot_of_row[row], slot);
            self.row_of_slot[old] = None;
            self.dead += 1;
        } else {
            self.slot_of_row.push(slot);
        }
        self.graph.insert_slice((vector, slot));
    }

    /// Follows the store's `swap_remove` of `row` (`last` moved into its place).
    pub(super) fn remove_row(&mut self, row: usize, last: usize) {
        let slot = self.slot_of_row.swap_remove(row);
        self.row_of_slot[slot] = None;
        self.dead += 1;
        if row != last {
            let moved = self.slot_of_row[row];
            self.row_of_slot[moved] = Some(row);
        }
    }

    /// Whether the graph beats a scan: not for small indexes, nor when `k` is a
    /// large share of the documents (a graph search then also tends to return
    /// fewer than `k`).
    pub(super) fn worth_it(&self, k: usize, live: usize) -> bool {
        live > self.params.exact_below && k.saturating_mul(10) < live
    }

    pub(super) fn needs_rebuild(&self) -> bool {
        self.dead > 1024 && self.dead > self.slot_of_row.len()
    }

    /// A fresh graph over exactly `rows`.
    pub(super) fn rebuild(&mut self, rows: &[&[f32]]) {
        self.graph = Self::graph(self.params, rows.len());
        self.slot_of_row = (0..rows.len()).collect();
        self.row_of_slot = (0..rows.len()).map(Some).collect();
        self.dead = 0;
        for (slot, vector) in rows.iter().enumerate() {
            self.graph.insert_slice((vector, slot));
        }
    }

    /// Rows of (about) the `k` nearest live vectors.
    pub(super) fn candidates(&self, query: &[f32], k: usize) -> Vec<usize> {
        if self.slot_of_row.is_empty() {
            return Vec::new();
        }
        let live = |slot: &usize| self.row_of_slot.get(*slot).is_some_and(Option::is_some);
        // The graph reserves `ef` entries up front: never ask for more than it holds.
        let k = k.min(self.slot_of_row.len());
        let ef = self.params.ef_search.max(k);
        self.graph
            .search_filter(query, k, ef, Some(&live))
            .into_iter()
            .filter_map(|n| self.row_of_slot.get(n.d_id).copied().flatten())
            .collect()
    }
}
