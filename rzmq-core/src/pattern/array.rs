//! An array of pipe ids with O(1) position lookup, as libzmq's `array_t`.
//!
//! The load balancer, fair queue and distributor keep their pipes in one vector partitioned into
//! ranges (active first, then passive); moving a pipe between ranges is a swap. The position map
//! makes "where is this pipe" O(1), as libzmq's `array_item_t` index does.

use super::{IdMap, PipeId};

/// Pipe ids in a vector plus each id's position.
#[derive(Default)]
pub(crate) struct PipeArray {
    items: Vec<PipeId>,
    pos: IdMap<usize>,
}

impl PipeArray {
    /// Number of pipes.
    #[inline]
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The pipe at position `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> PipeId {
        self.items[i]
    }

    /// The position of `id`, if present.
    #[inline]
    pub(crate) fn index(&self, id: PipeId) -> Option<usize> {
        self.pos.get(&id).copied()
    }

    /// Appends `id` (no-op when already present); returns its position.
    pub(crate) fn push(&mut self, id: PipeId) -> usize {
        if let Some(i) = self.index(id) {
            return i;
        }
        let i = self.items.len();
        self.items.push(id);
        self.pos.insert(id, i);
        i
    }

    /// Swaps the pipes at positions `a` and `b`.
    #[inline]
    pub(crate) fn swap(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        self.items.swap(a, b);
        self.pos.insert(self.items[a], a);
        self.pos.insert(self.items[b], b);
    }

    /// Removes `id` by moving the last pipe into its place (as libzmq's `array_t::erase`).
    pub(crate) fn erase(&mut self, id: PipeId) {
        let Some(i) = self.pos.remove(&id) else {
            return;
        };
        let last = self.items.len() - 1;
        if i != last {
            let moved = self.items[last];
            self.items[i] = moved;
            self.pos.insert(moved, i);
        }
        self.items.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_swap_erase_keep_positions() {
        let mut a = PipeArray::default();
        for i in 1..=4 {
            a.push(PipeId(i));
        }
        assert_eq!(a.push(PipeId(2)), 1);
        a.swap(0, 3);
        assert_eq!(a.index(PipeId(4)), Some(0));
        assert_eq!(a.index(PipeId(1)), Some(3));
        a.erase(PipeId(4));
        assert_eq!(a.len(), 3);
        assert_eq!(a.get(0), PipeId(1));
        assert_eq!(a.index(PipeId(1)), Some(0));
        assert_eq!(a.index(PipeId(4)), None);
        a.erase(PipeId(3));
        a.erase(PipeId(3));
        assert_eq!(a.len(), 2);
        for i in 0..a.len() {
            assert_eq!(a.index(a.get(i)), Some(i));
        }
    }
}
