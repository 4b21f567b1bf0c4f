//! Connected components of the fingerprint pairs: the one step of the job that is not a
//! relational query, kept behind one function so a distributed version can replace it.

use std::collections::HashMap;
use std::hash::Hash;

use petgraph::unionfind::UnionFind;

/// Labels every node that appears on an edge with its component, the label being the smallest
/// node of the component (deterministic, whatever the edge order). Sorted by node.
pub fn connected_components<N: Copy + Ord + Hash>(
    edges: impl IntoIterator<Item = (N, N)>,
) -> Vec<(N, N)> {
    let mut index: HashMap<N, usize> = HashMap::new();
    let mut nodes: Vec<N> = Vec::new();
    let mut dense_edges: Vec<(usize, usize)> = Vec::new();
    let mut dense = |node: N| {
        *index.entry(node).or_insert_with(|| {
            nodes.push(node);
            nodes.len() - 1
        })
    };
    for (a, b) in edges {
        dense_edges.push((dense(a), dense(b)));
    }
    let mut sets = UnionFind::<usize>::new(nodes.len());
    for (a, b) in dense_edges {
        sets.union(a, b);
    }
    let roots = sets.into_labeling();
    let mut smallest: HashMap<usize, N> = HashMap::new();
    for (i, root) in roots.iter().enumerate() {
        let label = smallest.entry(*root).or_insert(nodes[i]);
        *label = (*label).min(nodes[i]);
    }
    let mut labelled: Vec<(N, N)> = roots
        .iter()
        .enumerate()
        .map(|(i, root)| (nodes[i], smallest[root]))
        .collect();
    labelled.sort_unstable();
    labelled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_merge_and_labels_are_smallest_members() {
        let got = connected_components([(5, 9), (9, 2), (7, 8), (100, 100)]);
        assert_eq!(got, [(2, 2), (5, 2), (7, 7), (8, 7), (9, 2), (100, 100)]);
    }

    #[test]
    fn edge_order_does_not_matter() {
        let edges = [(1u64, 2u64), (3, 4), (2, 3), (10, 11)];
        let mut reversed = edges;
        reversed.reverse();
        let flipped: Vec<_> = edges.iter().map(|&(a, b)| (b, a)).collect();
        let expected = connected_components(edges);
        assert_eq!(connected_components(reversed), expected);
        assert_eq!(connected_components(flipped), expected);
        assert_eq!(expected.iter().filter(|(_, l)| *l == 1).count(), 4);
    }

    #[test]
    fn no_edges_no_components() {
        assert!(connected_components(std::iter::empty::<(u64, u64)>()).is_empty());
    }
}
