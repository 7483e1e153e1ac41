//! Length-sorted packing of tokenized inputs into batches under a padded-token budget.

/// One batch: indices into the caller's input list, longest first, and the padded length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    /// Positions in the original input, sorted by token length, longest first.
    pub indices: Vec<usize>,
    /// Every row of the batch is padded to this many tokens (the longest member's length).
    pub padded_len: usize,
}

#[cfg(test)]
impl Batch {
    /// Padded tokens this batch costs: rows × padded length.
    pub fn padded_tokens(&self) -> usize {
        self.indices.len() * self.padded_len
    }
}

/// Sorts inputs by token length (longest first, ties in input order) and packs consecutive
/// inputs greedily while `rows × longest` stays within `budget`. Because the list is sorted,
/// each batch's first row is its longest, so a batch's padding is at most the length spread
/// between its first and last row. A single input longer than the budget still gets a batch of
/// its own (never dropped).
pub(crate) fn plan(lengths: &[usize], budget: usize) -> Vec<Batch> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    // Stable sort: equal lengths keep input order, so the plan is deterministic.
    order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]));

    let mut batches = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut padded_len = 0;
    for idx in order {
        if current.is_empty() {
            padded_len = lengths[idx].max(1);
            current.push(idx);
            continue;
        }
        if (current.len() + 1) * padded_len <= budget {
            current.push(idx);
        } else {
            batches.push(Batch {
                indices: std::mem::take(&mut current),
                padded_len,
            });
            padded_len = lengths[idx].max(1);
            current.push(idx);
        }
    }
    if !current.is_empty() {
        batches.push(Batch {
            indices: current,
            padded_len,
        });
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_has_no_batches() {
        assert!(plan(&[], 100).is_empty());
    }

    #[test]
    fn sorts_longest_first_and_respects_budget() {
        let lengths = [3, 10, 5, 10, 2, 7];
        let batches = plan(&lengths, 20);
        for b in &batches {
            assert!(b.padded_tokens() <= 20, "{b:?}");
            for &i in &b.indices {
                assert!(lengths[i] <= b.padded_len);
            }
            assert_eq!(lengths[b.indices[0]], b.padded_len);
        }
        let flat: Vec<usize> = batches.iter().flat_map(|b| b.indices.clone()).collect();
        assert_eq!(flat, vec![1, 3, 5, 2, 0, 4]);
        let mut seen = flat.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..lengths.len()).collect::<Vec<_>>());
    }

    #[test]
    fn oversize_input_gets_its_own_batch() {
        let batches = plan(&[50, 4, 4], 16);
        assert_eq!(batches[0].indices, vec![0]);
        assert_eq!(batches[0].padded_len, 50);
        assert_eq!(batches[1].indices, vec![1, 2]);
    }

    #[test]
    fn every_input_lands_in_exactly_one_batch() {
        let lengths: Vec<usize> = (0..500).map(|i| (i * 37 % 251) + 2).collect();
        let batches = plan(&lengths, 1024);
        let mut seen: Vec<usize> = batches.iter().flat_map(|b| b.indices.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..500).collect::<Vec<_>>());
    }
}
