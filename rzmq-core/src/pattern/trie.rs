//! Subscription tries: [`Trie`] (SUB/XSUB: topics with reference counts, as libzmq `trie_t`) and
//! [`MTrie`] (PUB/XPUB: topics mapped to the set of pipes subscribed to them, as `mtrie_t`).
//!
//! Both are byte tries in an arena. Each node keeps a dense child table covering the byte range
//! `min..min + len` (as libzmq), so a match walks the message's first bytes with one index per
//! byte. Nothing recurses: topic length is chosen by remote peers, so walks, removals and
//! traversals use explicit stacks, and dropping a trie frees a flat vector. Nodes that hold no
//! subscription and have no children are pruned at once.
//!
//! Traversals ([`Trie::apply`], [`MTrie::rm_pipe`]) visit topics in byte order, depth first, a
//! node before its children, which is the order libzmq reports them.

use super::PipeId;

const NIL: u32 = u32::MAX;

/// What a node holds; empty means "no subscription here".
trait Slot: Default {
    fn is_empty(&self) -> bool;
}

impl Slot for u32 {
    fn is_empty(&self) -> bool {
        *self == 0
    }
}

impl Slot for Vec<PipeId> {
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

struct Node<V> {
    value: V,
    min: u8,
    /// Children for bytes `min..min + next.len()`; `NIL` where there is none.
    next: Vec<u32>,
    live: u32,
    parent: u32,
    byte: u8,
    alive: bool,
}

impl<V: Slot> Node<V> {
    fn new(parent: u32, byte: u8) -> Node<V> {
        Node {
            value: V::default(),
            min: 0,
            next: Vec::new(),
            live: 0,
            parent,
            byte,
            alive: true,
        }
    }
}

/// The shared arena trie under [`Trie`] and [`MTrie`].
struct Tree<V> {
    nodes: Vec<Node<V>>,
    free: Vec<u32>,
}

impl<V: Slot> Tree<V> {
    fn new() -> Tree<V> {
        Tree {
            nodes: vec![Node::new(NIL, 0)],
            free: Vec::new(),
        }
    }

    #[inline]
    fn child(&self, n: u32, c: u8) -> u32 {
        let node = &self.nodes[n as usize];
        match c.checked_sub(node.min) {
            Some(i) => node.next.get(i as usize).copied().unwrap_or(NIL),
            None => NIL,
        }
    }

    fn find(&self, key: &[u8]) -> Option<u32> {
        let mut n = 0;
        for &c in key {
            n = self.child(n, c);
            if n == NIL {
                return None;
            }
        }
        Some(n)
    }

    fn find_or_insert(&mut self, key: &[u8]) -> u32 {
        let mut n = 0;
        for &c in key {
            let ch = self.child(n, c);
            n = if ch == NIL { self.add_child(n, c) } else { ch };
        }
        n
    }

    fn add_child(&mut self, parent: u32, c: u8) -> u32 {
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = Node::new(parent, c);
                id
            }
            None => {
                self.nodes.push(Node::new(parent, c));
                (self.nodes.len() - 1) as u32
            }
        };
        let p = &mut self.nodes[parent as usize];
        if p.next.is_empty() {
            p.min = c;
            p.next.push(id);
        } else if c < p.min {
            let shift = (p.min - c) as usize;
            p.next.splice(0..0, (0..shift).map(|_| NIL));
            p.min = c;
            p.next[0] = id;
        } else {
            let i = (c - p.min) as usize;
            if i >= p.next.len() {
                p.next.resize(i + 1, NIL);
            }
            p.next[i] = id;
        }
        p.live += 1;
        id
    }

    /// Frees `n` and then each ancestor left with no subscription and no children.
    fn prune(&mut self, mut n: u32) {
        while n != 0 {
            let node = &mut self.nodes[n as usize];
            if !node.alive || !node.value.is_empty() || node.live != 0 {
                return;
            }
            node.alive = false;
            node.next = Vec::new();
            let (parent, c) = (node.parent, node.byte);
            self.free.push(n);
            let p = &mut self.nodes[parent as usize];
            p.next[(c - p.min) as usize] = NIL;
            p.live -= 1;
            if p.live == 0 {
                p.next = Vec::new();
                p.min = 0;
            } else {
                let lead = p.next.iter().take_while(|&&x| x == NIL).count();
                if lead > 0 {
                    p.next.drain(..lead);
                    p.min += lead as u8;
                }
                while p.next.last() == Some(&NIL) {
                    p.next.pop();
                }
            }
            n = parent;
        }
    }

    /// Calls `f` with the value of every node on the path spelled by `data` (prefixes of `data`,
    /// shortest first, the empty prefix included).
    #[inline]
    fn walk(&self, data: &[u8], mut f: impl FnMut(&V) -> bool) {
        let mut n = 0;
        let mut i = 0;
        loop {
            let node = &self.nodes[n as usize];
            if !node.value.is_empty() && !f(&node.value) {
                return;
            }
            if i == data.len() || node.live == 0 {
                return;
            }
            n = self.child(n, data[i]);
            if n == NIL {
                return;
            }
            i += 1;
        }
    }

    /// Visits every node depth first in byte order with its key; returns nothing, `f` may change
    /// the value (the caller prunes afterwards).
    fn for_each(&mut self, mut f: impl FnMut(&[u8], u32, &mut V)) {
        let mut key = Vec::new();
        let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
        while let Some((n, depth)) = stack.pop() {
            let node = &mut self.nodes[n as usize];
            if depth > 0 {
                key.truncate(depth - 1);
                key.push(node.byte);
            }
            f(&key, n, &mut node.value);
            let node = &self.nodes[n as usize];
            for &ch in node.next.iter().rev() {
                if ch != NIL {
                    stack.push((ch, depth + 1));
                }
            }
        }
    }

    #[cfg(test)]
    fn live_nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

/// Subscriptions with reference counts: SUB/XSUB's record of what it subscribed to.
pub(crate) struct Trie {
    tree: Tree<u32>,
    prefixes: usize,
}

impl Default for Trie {
    fn default() -> Self {
        Trie::new()
    }
}

impl Trie {
    /// An empty trie.
    pub(crate) fn new() -> Trie {
        Trie {
            tree: Tree::new(),
            prefixes: 0,
        }
    }

    /// Adds one reference to `topic`; true when the topic is new.
    pub(crate) fn add(&mut self, topic: &[u8]) -> bool {
        let n = self.tree.find_or_insert(topic);
        let v = &mut self.tree.nodes[n as usize].value;
        *v += 1;
        if *v == 1 {
            self.prefixes += 1;
            true
        } else {
            false
        }
    }

    /// Drops one reference to `topic`; true when that was the last one (false when absent).
    pub(crate) fn rm(&mut self, topic: &[u8]) -> bool {
        let Some(n) = self.tree.find(topic) else {
            return false;
        };
        let v = &mut self.tree.nodes[n as usize].value;
        if *v == 0 {
            return false;
        }
        *v -= 1;
        if *v > 0 {
            return false;
        }
        self.prefixes -= 1;
        self.tree.prune(n);
        true
    }

    /// True when some subscribed topic is a prefix of `data` (the empty topic matches all).
    #[inline]
    pub(crate) fn check(&self, data: &[u8]) -> bool {
        let mut found = false;
        self.tree.walk(data, |_| {
            found = true;
            false
        });
        found
    }

    /// Calls `f` once per subscribed topic, in byte order.
    pub(crate) fn apply(&mut self, mut f: impl FnMut(&[u8])) {
        self.tree.for_each(|key, _, v| {
            if *v > 0 {
                f(key)
            }
        });
    }

    /// Number of distinct subscribed topics (`ZMQ_TOPICS_COUNT`).
    pub(crate) fn num_prefixes(&self) -> usize {
        self.prefixes
    }

    /// Nodes in use, the root included (for tests: an emptied trie is back to 1).
    #[cfg(test)]
    pub(crate) fn node_count(&self) -> usize {
        self.tree.live_nodes()
    }
}

/// Outcome of [`MTrie::rm`], as libzmq's `rm_result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RmResult {
    /// The pipe was not subscribed to the topic.
    NotFound,
    /// The pipe was the topic's last subscriber.
    LastValueRemoved,
    /// Other pipes still subscribe to the topic.
    ValuesRemain,
}

/// Topics mapped to the pipes subscribed to them: PUB/XPUB's subscription table.
pub(crate) struct MTrie {
    tree: Tree<Vec<PipeId>>,
    prefixes: usize,
}

impl Default for MTrie {
    fn default() -> Self {
        MTrie::new()
    }
}

impl MTrie {
    /// An empty multi-trie.
    pub(crate) fn new() -> MTrie {
        MTrie {
            tree: Tree::new(),
            prefixes: 0,
        }
    }

    /// Subscribes `pipe` to `topic` (a set: twice is once); true when nobody had subscribed to
    /// the topic before.
    pub(crate) fn add(&mut self, topic: &[u8], pipe: PipeId) -> bool {
        let n = self.tree.find_or_insert(topic);
        let set = &mut self.tree.nodes[n as usize].value;
        let first = set.is_empty();
        if let Err(pos) = set.binary_search(&pipe) {
            set.insert(pos, pipe);
        }
        if first {
            self.prefixes += 1;
        }
        first
    }

    /// Unsubscribes `pipe` from `topic`.
    pub(crate) fn rm(&mut self, topic: &[u8], pipe: PipeId) -> RmResult {
        let Some(n) = self.tree.find(topic) else {
            return RmResult::NotFound;
        };
        let set = &mut self.tree.nodes[n as usize].value;
        if set.is_empty() {
            return RmResult::NotFound;
        }
        let erased = match set.binary_search(&pipe) {
            Ok(pos) => {
                set.remove(pos);
                true
            }
            Err(_) => false,
        };
        if set.is_empty() {
            self.prefixes -= 1;
            self.tree.prune(n);
            return RmResult::LastValueRemoved;
        }
        if erased {
            RmResult::ValuesRemain
        } else {
            RmResult::NotFound
        }
    }

    /// Removes every subscription of `pipe`, calling `f` with each topic it held, or (when
    /// `only_last` is set) only with the topics nobody subscribes to any more.
    pub(crate) fn rm_pipe(&mut self, pipe: PipeId, only_last: bool, mut f: impl FnMut(&[u8])) {
        let mut emptied = Vec::new();
        self.tree.for_each(|key, n, set| {
            if let Ok(pos) = set.binary_search(&pipe) {
                set.remove(pos);
                if !only_last || set.is_empty() {
                    f(key);
                }
                if set.is_empty() {
                    emptied.push(n);
                }
            }
        });
        self.prefixes -= emptied.len();
        for n in emptied.into_iter().rev() {
            self.tree.prune(n);
        }
    }

    /// Calls `f` for every pipe subscribed to a prefix of `data` (once per matching topic: a pipe
    /// subscribed to two matching topics is named twice).
    #[inline]
    pub(crate) fn match_pipes(&self, data: &[u8], mut f: impl FnMut(PipeId)) {
        self.tree.walk(data, |set| {
            for &p in set {
                f(p)
            }
            true
        });
    }

    /// Number of distinct subscribed topics (`ZMQ_TOPICS_COUNT`).
    pub(crate) fn num_prefixes(&self) -> usize {
        self.prefixes
    }

    /// Nodes in use, the root included (for tests: an emptied trie is back to 1).
    #[cfg(test)]
    pub(crate) fn node_count(&self) -> usize {
        self.tree.live_nodes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn prefix_matching_and_refcounts() {
        let mut t = Trie::new();
        assert!(!t.check(b"abc"));
        assert!(t.add(b"ab"));
        assert!(!t.add(b"ab"));
        assert!(t.check(b"abc") && t.check(b"ab") && !t.check(b"a") && !t.check(b"b"));
        assert!(!t.rm(b"ab"));
        assert!(t.check(b"abc"));
        assert!(t.rm(b"ab"));
        assert!(!t.check(b"abc"));
        assert!(!t.rm(b"ab"), "removing an absent topic reports false");
        assert_eq!(t.node_count(), 1);
        assert!(t.add(b""));
        assert!(t.check(b"") && t.check(b"anything"));
        assert!(t.rm(b""));
        assert!(!t.check(b""));
    }

    #[test]
    fn apply_in_byte_order_once_per_topic() {
        let mut t = Trie::new();
        for k in [&b"b"[..], b"a", b"ab", b"", b"a", b"\xff", b"\x00"] {
            t.add(k);
        }
        let mut seen = Vec::new();
        t.apply(|k| seen.push(k.to_vec()));
        assert_eq!(
            seen,
            vec![
                b"".to_vec(),
                b"\x00".to_vec(),
                b"a".to_vec(),
                b"ab".to_vec(),
                b"b".to_vec(),
                b"\xff".to_vec()
            ]
        );
        assert_eq!(t.num_prefixes(), 6);
    }

    #[test]
    fn deep_topics_do_not_recurse() {
        let mut t = Trie::new();
        let long = vec![b'x'; 200_000];
        t.add(&long);
        assert!(t.check(&long));
        assert!(!t.check(&long[..1000]));
        let mut n = 0;
        t.apply(|k| n += k.len());
        assert_eq!(n, long.len());
        assert!(t.rm(&long));
        assert_eq!(t.node_count(), 1);
        t.add(&long);
        drop(t);
        let mut m = MTrie::new();
        m.add(&long, PipeId(1));
        let mut got = 0;
        m.rm_pipe(PipeId(1), true, |k| got = k.len());
        assert_eq!(got, long.len());
        assert_eq!(m.node_count(), 1);
    }

    #[test]
    fn mtrie_results_and_rm_pipe() {
        let mut m = MTrie::new();
        let (p1, p2) = (PipeId(1), PipeId(2));
        assert!(m.add(b"a", p1));
        assert!(!m.add(b"a", p2));
        assert!(!m.add(b"a", p1));
        assert!(m.add(b"ab", p1));
        assert_eq!(m.rm(b"zz", p1), RmResult::NotFound);
        assert_eq!(m.rm(b"ab", p2), RmResult::NotFound);
        let mut hits = Vec::new();
        m.match_pipes(b"abc", |p| hits.push(p));
        hits.sort();
        assert_eq!(hits, vec![p1, p1, p2]);
        let mut gone = Vec::new();
        m.rm_pipe(p1, true, |k| gone.push(k.to_vec()));
        assert_eq!(gone, vec![b"ab".to_vec()]);
        assert_eq!(m.rm(b"a", p2), RmResult::LastValueRemoved);
        assert_eq!(m.node_count(), 1);
        assert_eq!(m.num_prefixes(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(Vec<u8>),
        Rm(Vec<u8>),
        Check(Vec<u8>),
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop::sample::select(vec![0u8, 1, b'a', b'b', 200, 255]),
            0..5,
        )
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            key().prop_map(Op::Add),
            key().prop_map(Op::Rm),
            key().prop_map(Op::Check)
        ]
    }

    proptest! {
        #[test]
        fn trie_matches_naive_model(ops in prop::collection::vec(op(), 0..200)) {
            let mut t = Trie::new();
            let mut model: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Add(k) => {
                        let c = model.entry(k.clone()).or_insert(0);
                        *c += 1;
                        prop_assert_eq!(t.add(&k), *c == 1);
                    }
                    Op::Rm(k) => {
                        let expect = match model.get_mut(&k) {
                            Some(c) => { *c -= 1; if *c == 0 { model.remove(&k); true } else { false } }
                            None => false,
                        };
                        prop_assert_eq!(t.rm(&k), expect);
                    }
                    Op::Check(d) => {
                        let expect = model.keys().any(|k| d.starts_with(k));
                        prop_assert_eq!(t.check(&d), expect);
                    }
                }
                prop_assert_eq!(t.num_prefixes(), model.len());
                let mut listed = Vec::new();
                t.apply(|k| listed.push(k.to_vec()));
                prop_assert_eq!(listed, model.keys().cloned().collect::<Vec<_>>());
            }
            let keys: Vec<_> = model.iter().flat_map(|(k, &c)| (0..c).map(move |_| k.clone())).collect();
            for k in keys {
                t.rm(&k);
            }
            prop_assert_eq!(t.node_count(), 1);
        }

        #[test]
        fn mtrie_matches_naive_model(ops in prop::collection::vec((0u8..4, op(), any::<bool>()), 0..200)) {
            let mut m = MTrie::new();
            let mut model: BTreeMap<Vec<u8>, BTreeSet<u64>> = BTreeMap::new();
            for (p, op, flag) in ops {
                let pipe = PipeId(u64::from(p));
                match op {
                    Op::Add(k) => {
                        let first = !model.contains_key(&k);
                        model.entry(k.clone()).or_default().insert(pipe.0);
                        prop_assert_eq!(m.add(&k, pipe), first);
                    }
                    Op::Rm(k) if flag => {
                        let expect = match model.get_mut(&k) {
                            None => RmResult::NotFound,
                            Some(s) => {
                                let erased = s.remove(&pipe.0);
                                if s.is_empty() { model.remove(&k); RmResult::LastValueRemoved }
                                else if erased { RmResult::ValuesRemain } else { RmResult::NotFound }
                            }
                        };
                        prop_assert_eq!(m.rm(&k, pipe), expect);
                    }
                    Op::Rm(_) => {
                        let only_last = p % 2 == 0;
                        let mut expect = Vec::new();
                        for (k, s) in model.iter_mut() {
                            if s.remove(&pipe.0) && (!only_last || s.is_empty()) {
                                expect.push(k.clone());
                            }
                        }
                        model.retain(|_, s| !s.is_empty());
                        let mut got = Vec::new();
                        m.rm_pipe(pipe, only_last, |k| got.push(k.to_vec()));
                        prop_assert_eq!(got, expect);
                    }
                    Op::Check(d) => {
                        let mut expect: Vec<u64> = model.iter().filter(|(k, _)| d.starts_with(k)).flat_map(|(_, s)| s.iter().copied()).collect();
                        expect.sort();
                        let mut got = Vec::new();
                        m.match_pipes(&d, |p| got.push(p.0));
                        got.sort();
                        prop_assert_eq!(got, expect);
                    }
                }
                prop_assert_eq!(m.num_prefixes(), model.len());
            }
            for p in 0..4 {
                m.rm_pipe(PipeId(p), false, |_| {});
            }
            prop_assert_eq!(m.node_count(), 1);
            prop_assert_eq!(m.num_prefixes(), 0);
        }
    }
}
