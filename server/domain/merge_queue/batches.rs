//! How the merge queue cuts its work: a lane's entries into batches gated at once on the projected
//! heads ahead of them, a red batch into the parts bisection gates, and a queue's entries into
//! lanes whose changed paths are disjoint. Positions are indexes into a lane's chain of merges: a
//! cut `c` is the projected head after the first `c` entries.

/// The prefixes to gate of a chain of `len` entries, `batch_max` entries apart, at most `depth`
/// of them (the batches speculated on at once): `[b, 2b, …]`, the last one `len` if it is in reach.
pub fn batch_cuts(len: usize, batch_max: usize, depth: usize) -> Vec<usize> {
    let step = batch_max.max(1);
    (1..=depth.max(1)).map(|i| (i * step).min(len)).take_while(|&c| c > 0).fold(Vec::new(), |mut cuts, c| {
        if cuts.last() != Some(&c) {
            cuts.push(c);
        }
        cuts
    })
}

/// The prefixes bisection gates in parallel when the chain is green up to `green` and red at
/// `red` (`green < red - 1`): the range split into at most `parallel + 1` parts as equal as may
/// be, each part gated on top of the parts before it; `red` itself is known already.
pub fn bisect_cuts(green: usize, red: usize, parallel: usize) -> Vec<usize> {
    let len = red.saturating_sub(green);
    if len < 2 {
        return Vec::new();
    }
    let parts = (parallel.max(1) + 1).min(len);
    (1..parts).map(|i| green + (i * len).div_ceil(parts)).collect()
}

/// Splits entries (in queue order) into lanes: entries that may conflict (`overlaps`, asked of
/// each pair) share a lane, and so, transitively, an entry touching two lanes joins them and
/// waits for both. Independent groups are then packed into at most `most` lanes, each group to
/// the lane with the fewest entries so far. Each lane lists its entries in queue order.
pub fn lanes(len: usize, most: usize, overlaps: impl Fn(usize, usize) -> bool) -> Vec<Vec<usize>> {
    let mut group: Vec<usize> = (0..len).collect();
    fn root(group: &mut [usize], mut i: usize) -> usize {
        while group[i] != i {
            group[i] = group[group[i]];
            i = group[i];
        }
        i
    }
    for i in 0..len {
        for j in 0..i {
            if overlaps(j, i) {
                let (a, b) = (root(&mut group, i), root(&mut group, j));
                group[a.max(b)] = a.min(b);
            }
        }
    }
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in 0..len {
        let r = root(&mut group, i);
        match groups.iter_mut().find(|(g, _)| *g == r) {
            Some((_, members)) => members.push(i),
            None => groups.push((r, vec![i])),
        }
    }
    let mut lanes: Vec<Vec<usize>> = vec![Vec::new(); most.max(1).min(groups.len().max(1))];
    for (_, members) in groups {
        let lane = lanes.iter_mut().min_by_key(|l| l.len()).expect("one lane at least");
        lane.extend(members);
    }
    lanes.retain(|l| !l.is_empty());
    for lane in &mut lanes {
        lane.sort_unstable();
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_cut_batch_max_apart_up_to_the_depth_and_the_end() {
        assert_eq!(batch_cuts(10, 4, 4), [4, 8, 10]);
        assert_eq!(batch_cuts(10, 4, 2), [4, 8]);
        assert_eq!(batch_cuts(3, 4, 4), [3]);
        assert_eq!(batch_cuts(3, 1, 2), [1, 2]);
        assert!(batch_cuts(0, 4, 4).is_empty());
    }

    #[test]
    fn bisection_splits_the_red_range_into_parts_each_on_those_before_it() {
        assert_eq!(bisect_cuts(0, 4, 1), [2]);
        assert_eq!(bisect_cuts(0, 4, 3), [1, 2, 3]);
        assert_eq!(bisect_cuts(2, 4, 1), [3]);
        assert_eq!(bisect_cuts(0, 8, 3), [2, 4, 6]);
        assert_eq!(bisect_cuts(0, 5, 1), [3]);
        assert!(bisect_cuts(3, 4, 4).is_empty(), "one entry: it is the culprit");
        // Gate runs to find one culprit in a batch of b, one gate at a time: ⌈log2 b⌉.
        for b in [2usize, 4, 8, 16, 64] {
            let mut worst = 0;
            for culprit in 0..b {
                let (mut green, mut red, mut runs) = (0, b, 0);
                while red - green > 1 {
                    for cut in bisect_cuts(green, red, 1) {
                        runs += 1;
                        if cut > culprit {
                            red = red.min(cut);
                        } else {
                            green = green.max(cut);
                        }
                    }
                }
                assert_eq!(green, culprit);
                worst = worst.max(runs);
            }
            assert_eq!(worst, b.ilog2() as usize, "batch of {b}");
        }
    }

    #[test]
    fn entries_that_share_a_path_share_a_lane_and_one_touching_two_lanes_joins_them() {
        // 0 and 2 overlap; 1 alone; 3 touches 1 and 4.
        let pairs = [(0, 2), (1, 3), (3, 4)];
        let overlaps = |a: usize, b: usize| pairs.contains(&(a, b));
        assert_eq!(lanes(6, 4, overlaps), [vec![0, 2], vec![1, 3, 4], vec![5]]);
        assert_eq!(lanes(6, 2, overlaps), [vec![0, 2, 5], vec![1, 3, 4]]);
        assert_eq!(lanes(3, 4, |_, _| true), [vec![0, 1, 2]]);
        assert_eq!(lanes(4, 2, |_, _| false), [vec![0, 2], vec![1, 3]]);
        assert!(lanes(0, 2, |_, _| false).is_empty());
    }
}
