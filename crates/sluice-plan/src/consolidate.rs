//! TurboStream's coarse-grained placement (Wu et al., "TurboStream: Towards Low-Latency Data
//! Stream Processing", section V): which host each task (operator instance) runs on, so that
//! tasks that talk much share a host and every host carries a load in proportion to its free
//! slots.
//!
//! Two steps, as the paper's:
//! - [`TaskConsolidation`] (its Algorithm 1): each task, in turn, is paired with its heaviest
//!   neighbour not yet paired (or left alone when it has none), making a parent task whose
//!   weight is the sum and whose traffic to other parents is the sum of its children's; the
//!   traffic inside a parent no longer counts. Levels repeat until fewer tasks than a threshold
//!   remain, or a level pairs nothing. One guard the paper lacks: two tasks are not paired when
//!   together they would weigh more than a slot's fair share of the load, since a parent that
//!   heavy cannot be balanced later (VWAP's 332 tasks on 4 hosts consolidated without it left
//!   one host 3.5 times the mean load).
//! - [`TaskAssignment`] (its Algorithm 2, applied recursively): the hosts are split in two
//!   halves, and the parent tasks are split to match, each half's share of the load as close
//!   as possible to its hosts' share of the slots. A split grows from each task in turn,
//!   breadth first along traffic edges, taking a task only when that brings the share closer
//!   to the target; of the splits balanced within `balance_tolerance`, the one cutting the
//!   least traffic wins (with none balanced that well, the best balanced). The halves are
//!   split again until each has one host.
//!
//! Tasks are then spread over the PEs of their host round robin, which is the planner's work,
//! not this module's. Everything here is a pure function of a [`TaskGraph`]: weights (CPU per
//! second, or 1 per task when nothing is profiled) and traffic (tuples or bytes per second).

use std::collections::{BTreeMap, VecDeque};

/// Tasks with their load and the traffic between them, undirected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskGraph {
    weights: Vec<f64>,
    /// Traffic between two tasks, keyed by (lower index, higher index).
    traffic: BTreeMap<(usize, usize), f64>,
}

impl TaskGraph {
    /// Tasks with these loads and no traffic yet.
    pub fn new(weights: Vec<f64>) -> Self {
        Self {
            weights,
            traffic: BTreeMap::new(),
        }
    }

    /// Adds `amount` of traffic between `a` and `b` (either direction; a task's traffic to
    /// itself does not count).
    ///
    /// # Panics
    /// If `a` or `b` is not a task.
    pub fn add_traffic(&mut self, a: usize, b: usize, amount: f64) {
        assert!(
            a < self.len() && b < self.len(),
            "traffic between tasks {a} and {b} of {}",
            self.len()
        );
        if a != b {
            *self.traffic.entry((a.min(b), a.max(b))).or_default() += amount;
        }
    }

    /// How many tasks there are.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The load of task `task`.
    pub fn weight(&self, task: usize) -> f64 {
        self.weights[task]
    }

    /// Every task's neighbours with the traffic to each.
    fn neighbours(&self) -> Vec<Vec<(usize, f64)>> {
        let mut lists = vec![Vec::new(); self.len()];
        for (&(a, b), &amount) in &self.traffic {
            lists[a].push((b, amount));
            lists[b].push((a, amount));
        }
        lists
    }

    /// The traffic between tasks that `part` puts in different parts.
    pub fn cut(&self, part: &[usize]) -> f64 {
        self.traffic
            .iter()
            .filter(|((a, b), _)| part[*a] != part[*b])
            .fold(0.0, |sum, (_, amount)| sum + amount)
    }

    /// All traffic.
    pub fn total_traffic(&self) -> f64 {
        self.traffic.values().fold(0.0, |sum, amount| sum + amount)
    }

    /// The graph of the groups `group_of` makes: a group weighs its tasks' sum, and the
    /// traffic between groups is the sum of their tasks'.
    fn quotient(&self, group_of: &[usize], groups: usize) -> TaskGraph {
        let mut weights = vec![0.0; groups];
        for (task, &group) in group_of.iter().enumerate() {
            weights[group] += self.weights[task];
        }
        let mut quotient = TaskGraph::new(weights);
        for (&(a, b), &amount) in &self.traffic {
            quotient.add_traffic(group_of[a], group_of[b], amount);
        }
        quotient
    }

    /// The graph of the tasks in `members` alone, renumbered in that order.
    fn subgraph(&self, members: &[usize]) -> TaskGraph {
        let mut index = vec![None; self.len()];
        for (i, &task) in members.iter().enumerate() {
            index[task] = Some(i);
        }
        let mut sub = TaskGraph::new(members.iter().map(|&t| self.weights[t]).collect());
        for (&(a, b), &amount) in &self.traffic {
            if let (Some(a), Some(b)) = (index[a], index[b]) {
                sub.add_traffic(a, b, amount);
            }
        }
        sub
    }
}

/// Algorithm 1: tasks paired level after level into parent tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskConsolidation {
    /// The parent tasks of the last level.
    pub parents: TaskGraph,
    /// The parent (index into `parents`) of every original task.
    pub parent_of: Vec<usize>,
}

impl TaskConsolidation {
    /// Consolidates `tasks` until fewer than `threshold` parents remain or a level pairs
    /// nothing, never making a parent heavier than `max_weight` from two lighter ones.
    pub fn new(tasks: &TaskGraph, threshold: usize, max_weight: f64) -> Self {
        let mut parents = tasks.clone();
        let mut parent_of: Vec<usize> = (0..tasks.len()).collect();
        while parents.len() >= threshold.max(1) {
            let (level_of, count) = Self::one_level(&parents, max_weight);
            if count == parents.len() {
                break;
            }
            for parent in &mut parent_of {
                *parent = level_of[*parent];
            }
            parents = parents.quotient(&level_of, count);
        }
        Self { parents, parent_of }
    }

    /// One level: each unvisited task, in order, with its heaviest unvisited neighbour that
    /// keeps the pair within `max_weight`. Returns every task's parent and how many parents
    /// there are.
    fn one_level(tasks: &TaskGraph, max_weight: f64) -> (Vec<usize>, usize) {
        let neighbours = tasks.neighbours();
        let mut parent_of = vec![usize::MAX; tasks.len()];
        let mut count = 0;
        for task in 0..tasks.len() {
            if parent_of[task] != usize::MAX {
                continue;
            }
            let mut by_traffic = neighbours[task].clone();
            // Heaviest first; ties by index, so the result does not depend on map order.
            by_traffic.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            parent_of[task] = count;
            let fits = |n: usize| tasks.weight(task) + tasks.weight(n) <= max_weight;
            if let Some(&(partner, _)) = by_traffic
                .iter()
                .find(|(n, _)| parent_of[*n] == usize::MAX && fits(*n))
            {
                parent_of[partner] = count;
            }
            count += 1;
        }
        (parent_of, count)
    }
}

/// Algorithm 2 applied recursively: the host of every task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskAssignment {
    /// The host (index into the slots given) of every task.
    pub host_of: Vec<usize>,
}

/// How far from its target share a split's load may be and still count as balanced, as a
/// fraction of the whole load (the paper's `factor`).
pub const DEFAULT_BALANCE_TOLERANCE: f64 = 0.05;

impl TaskAssignment {
    /// Consolidates `tasks` (to fewer than `threshold` parents, but never below twice the
    /// hosts, so every host can get work, and no parent above a slot's share of the load
    /// unless a task alone is) and assigns the parents to hosts with `slots[h]`
    /// free slots each; every task goes where its parent goes.
    ///
    /// # Panics
    /// If `slots` is empty.
    pub fn new(tasks: &TaskGraph, slots: &[usize], threshold: usize, tolerance: f64) -> Self {
        assert!(!slots.is_empty(), "no hosts to assign tasks to");
        let total: f64 = (0..tasks.len()).map(|t| tasks.weight(t)).sum();
        let fair_share = total / slots.iter().sum::<usize>().max(1) as f64;
        let consolidation =
            TaskConsolidation::new(tasks, threshold.max(2 * slots.len()), fair_share);
        let parents = &consolidation.parents;
        let mut parent_host = vec![0; parents.len()];
        let hosts: Vec<usize> = (0..slots.len()).collect();
        let members: Vec<usize> = (0..parents.len()).collect();
        Self::split(
            parents,
            &members,
            &hosts,
            slots,
            tolerance,
            &mut parent_host,
        );
        let mut host_of: Vec<usize> = consolidation
            .parent_of
            .iter()
            .map(|&p| parent_host[p])
            .collect();
        refine(tasks, slots, &mut host_of);
        Self { host_of }
    }

    /// Places `members` of `tasks` on `hosts`, halving both until one host is left.
    fn split(
        tasks: &TaskGraph,
        members: &[usize],
        hosts: &[usize],
        slots: &[usize],
        tolerance: f64,
        host_of: &mut [usize],
    ) {
        if let [host] = hosts {
            for &task in members {
                host_of[task] = *host;
            }
            return;
        }
        let (first_hosts, second_hosts) = hosts.split_at(hosts.len().div_ceil(2));
        let slots_of = |hs: &[usize]| hs.iter().map(|&h| slots[h]).sum::<usize>() as f64;
        let all_slots = slots_of(hosts);
        let target = if all_slots > 0.0 {
            slots_of(first_hosts) / all_slots
        } else {
            first_hosts.len() as f64 / hosts.len() as f64
        };
        let sub = tasks.subgraph(members);
        let gathered = bisect(&sub, target, tolerance);
        let (first, second): (Vec<usize>, Vec<usize>) =
            (0..members.len()).partition(|&i| gathered[i]);
        let first: Vec<usize> = first.into_iter().map(|i| members[i]).collect();
        let second: Vec<usize> = second.into_iter().map(|i| members[i]).collect();
        Self::split(tasks, &first, first_hosts, slots, tolerance, host_of);
        Self::split(tasks, &second, second_hosts, slots, tolerance, host_of);
    }
}

/// The most passes [`refine`] makes over the tasks.
const REFINE_PASSES: usize = 8;

/// Improves a placement task by task, after the paper's algorithms: moves a task to another
/// host, or swaps two tasks of different hosts, whenever that cuts traffic without raising
/// the most loaded host's load per slot; passes repeat until one changes nothing. The paper's
/// bisection grows each part breadth first and keeps the first split that balances, which on
/// all-to-all traffic (the Throughput Test's key-by between two parallel bolts) cut more than
/// round robin; these moves recover the difference (a Kernighan-Lin style refinement).
fn refine(tasks: &TaskGraph, slots: &[usize], host_of: &mut [usize]) {
    let hosts = slots.len();
    let neighbours = tasks.neighbours();
    // to_host[t][h]: the traffic between task t and the tasks on host h.
    let mut to_host = vec![vec![0.0; hosts]; tasks.len()];
    for (t, list) in neighbours.iter().enumerate() {
        for &(n, amount) in list {
            to_host[t][host_of[n]] += amount;
        }
    }
    let mut load = vec![0.0; hosts];
    for (t, &h) in host_of.iter().enumerate() {
        load[h] += tasks.weight(t);
    }
    let per_slot = |load: &[f64], h: usize| load[h] / slots[h].max(1) as f64;
    let worst = |load: &[f64]| (0..hosts).map(|h| per_slot(load, h)).fold(0.0, f64::max);
    let relocate = |t: usize, to: usize, host_of: &mut [usize], to_host: &mut [Vec<f64>]| {
        let from = host_of[t];
        for &(n, amount) in &neighbours[t] {
            to_host[n][from] -= amount;
            to_host[n][to] += amount;
        }
        host_of[t] = to;
    };
    const EPSILON: f64 = 1e-9;
    for _ in 0..REFINE_PASSES {
        let mut improved = false;
        for t in 0..tasks.len() {
            let from = host_of[t];
            let w = tasks.weight(t);
            let limit = worst(&load) + EPSILON;
            // A move: the best host that takes t within the load limit.
            let best_move = (0..hosts)
                .filter(|&h| h != from && slots[h] > 0)
                .filter(|&h| (load[h] + w) / slots[h] as f64 <= limit)
                .map(|h| (to_host[t][h] - to_host[t][from], h))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((_, to)) = best_move.filter(|(gain, _)| *gain > EPSILON) {
                load[from] -= w;
                load[to] += w;
                relocate(t, to, host_of, &mut to_host);
                improved = true;
                continue;
            }
            // A swap with a task u of another host.
            let mut best_swap: Option<(f64, usize)> = None;
            for u in 0..tasks.len() {
                let there = host_of[u];
                if there == from {
                    continue;
                }
                let between = neighbours[t]
                    .iter()
                    .find(|&&(n, _)| n == u)
                    .map_or(0.0, |&(_, amount)| amount);
                let gain = to_host[t][there] - to_host[t][from] + to_host[u][from]
                    - to_host[u][there]
                    - 2.0 * between;
                let wu = tasks.weight(u);
                let fits = (load[from] - w + wu) / slots[from].max(1) as f64 <= limit
                    && (load[there] - wu + w) / slots[there].max(1) as f64 <= limit;
                if fits && gain > best_swap.map_or(EPSILON, |b| b.0) {
                    best_swap = Some((gain, u));
                }
            }
            if let Some((_, u)) = best_swap {
                let there = host_of[u];
                let wu = tasks.weight(u);
                load[from] += wu - w;
                load[there] += w - wu;
                relocate(t, there, host_of, &mut to_host);
                relocate(u, from, host_of, &mut to_host);
                improved = true;
            }
        }
        if !improved {
            break;
        }
    }
}

/// Algorithm 2 once: which tasks go to the first part, whose share of the load should be
/// `target`.
pub fn bisect(tasks: &TaskGraph, target: f64, tolerance: f64) -> Vec<bool> {
    let total: f64 = (0..tasks.len()).map(|t| tasks.weight(t)).sum();
    if tasks.is_empty() || total <= 0.0 {
        // Nothing to balance: split by count.
        let first = (tasks.len() as f64 * target).round() as usize;
        return (0..tasks.len()).map(|t| t < first).collect();
    }
    let neighbours = tasks.neighbours();
    // The best split so far: (balanced within tolerance, cut, distance from target).
    let mut best: Option<(bool, f64, f64, Vec<bool>)> = None;
    for start in 0..tasks.len() {
        let mut gathered = vec![false; tasks.len()];
        let mut visited = vec![false; tasks.len()];
        let mut queue = VecDeque::from([start]);
        let mut weight = 0.0;
        let mut share = 0.0;
        while share < target {
            let Some(task) = queue.pop_front() else {
                // The component is used up: go on from the next unvisited task, as the
                // paper does while the split is still short of its target.
                match (0..tasks.len()).find(|&t| !visited[t]) {
                    Some(next) if (share - target).abs() > tolerance => {
                        queue.push_back(next);
                        continue;
                    }
                    _ => break,
                }
            };
            if visited[task] {
                continue;
            }
            visited[task] = true;
            let with = (weight + tasks.weight(task)) / total;
            if (with - target).abs() < (share - target).abs() {
                gathered[task] = true;
                weight += tasks.weight(task);
                share = with;
                queue.extend(
                    neighbours[task]
                        .iter()
                        .map(|&(n, _)| n)
                        .filter(|&n| !visited[n]),
                );
            }
        }
        let distance = (share - target).abs();
        let part: Vec<usize> = gathered.iter().map(|&g| usize::from(g)).collect();
        let candidate = (distance < tolerance, tasks.cut(&part), distance, gathered);
        let better = match &best {
            None => true,
            Some((balanced, cut, dist, _)) => match (candidate.0, *balanced) {
                (true, false) => true,
                (false, true) => false,
                (true, true) => candidate.1 < *cut,
                (false, false) => candidate.2 < *dist,
            },
        };
        if better {
            best = Some(candidate);
        }
    }
    best.map(|(_, _, _, gathered)| gathered).unwrap_or_default()
}

/// How good a placement is: the paper's Table II figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlacementQuality {
    /// The fraction of all traffic that crosses hosts (0 when there is no traffic).
    pub cross_host_traffic: f64,
    /// The most loaded host's load per slot over the mean load per slot (1 is perfect).
    pub imbalance: f64,
}

impl PlacementQuality {
    /// Measures `host_of` (the host of every task) on hosts with `slots` free slots.
    pub fn of(tasks: &TaskGraph, host_of: &[usize], slots: &[usize]) -> Self {
        let total = tasks.total_traffic();
        let cross_host_traffic = if total > 0.0 {
            tasks.cut(host_of) / total
        } else {
            0.0
        };
        let mut load = vec![0.0; slots.len()];
        for (task, &host) in host_of.iter().enumerate() {
            load[host] += tasks.weight(task);
        }
        let all_slots: usize = slots.iter().sum();
        let mean = load.iter().sum::<f64>() / all_slots.max(1) as f64;
        let worst = load
            .iter()
            .zip(slots)
            .filter(|(_, &s)| s > 0)
            .map(|(l, &s)| l / s as f64)
            .fold(0.0, f64::max);
        Self {
            cross_host_traffic,
            imbalance: if mean > 0.0 { worst / mean } else { 1.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain a-b-c-d with heavy a-b and c-d, light b-c.
    fn two_pairs() -> TaskGraph {
        let mut g = TaskGraph::new(vec![1.0; 4]);
        g.add_traffic(0, 1, 100.0);
        g.add_traffic(1, 2, 1.0);
        g.add_traffic(2, 3, 100.0);
        g
    }

    #[test]
    fn a_level_pairs_each_task_with_its_heaviest_free_neighbour() {
        let c = TaskConsolidation::new(&two_pairs(), 3, f64::INFINITY);
        assert_eq!(c.parent_of, vec![0, 0, 1, 1]);
        assert_eq!(c.parents.len(), 2);
        // Only the light edge is left between the parents.
        assert_eq!(c.parents.total_traffic(), 1.0);
        assert_eq!(c.parents.weight(0), 2.0);
    }

    #[test]
    fn consolidation_stops_below_the_threshold_or_when_nothing_pairs() {
        // Threshold 1: levels go on until one parent is left.
        let c = TaskConsolidation::new(&two_pairs(), 1, f64::INFINITY);
        assert_eq!(c.parents.len(), 1);
        assert_eq!(c.parent_of, vec![0; 4]);
        // No traffic: nothing pairs, so the tasks stay as they are.
        let lonely = TaskGraph::new(vec![1.0; 5]);
        let c = TaskConsolidation::new(&lonely, 2, f64::INFINITY);
        assert_eq!(c.parents.len(), 5);
        // A weight limit of 1.5 forbids every pair of these unit tasks.
        let c = TaskConsolidation::new(&two_pairs(), 1, 1.5);
        assert_eq!(c.parents.len(), 4);
    }

    #[test]
    fn two_hosts_cut_only_the_light_edge() {
        let a = TaskAssignment::new(&two_pairs(), &[1, 1], 8, DEFAULT_BALANCE_TOLERANCE);
        assert_eq!(a.host_of[0], a.host_of[1]);
        assert_eq!(a.host_of[2], a.host_of[3]);
        assert_ne!(a.host_of[0], a.host_of[2]);
        let q = PlacementQuality::of(&two_pairs(), &a.host_of, &[1, 1]);
        assert!((q.cross_host_traffic - 1.0 / 201.0).abs() < 1e-12);
        assert_eq!(q.imbalance, 1.0);
    }

    #[test]
    fn bisection_follows_the_slots_a_host_has() {
        // Six equal tasks in a ring of equal traffic, one host with two slots, one with one:
        // four tasks go to the first, two to the second, and the ring is cut twice.
        let mut ring = TaskGraph::new(vec![1.0; 6]);
        for t in 0..6 {
            ring.add_traffic(t, (t + 1) % 6, 10.0);
        }
        let a = TaskAssignment::new(&ring, &[2, 1], 8, DEFAULT_BALANCE_TOLERANCE);
        let on_first = a.host_of.iter().filter(|&&h| h == 0).count();
        assert_eq!(on_first, 4);
        assert_eq!(ring.cut(&a.host_of), 20.0);
    }

    #[test]
    fn four_hosts_keep_each_heavy_pair_together() {
        // Four heavy pairs joined by light edges, four hosts: a pair per host.
        let mut g = TaskGraph::new(vec![1.0; 8]);
        for p in 0..4 {
            g.add_traffic(2 * p, 2 * p + 1, 50.0);
            g.add_traffic(2 * p + 1, (2 * p + 2) % 8, 1.0);
        }
        let a = TaskAssignment::new(&g, &[1, 1, 1, 1], 8, DEFAULT_BALANCE_TOLERANCE);
        for p in 0..4 {
            assert_eq!(a.host_of[2 * p], a.host_of[2 * p + 1], "{:?}", a.host_of);
        }
        let mut hosts = a.host_of.clone();
        hosts.sort_unstable();
        hosts.dedup();
        assert_eq!(hosts.len(), 4);
        assert_eq!(PlacementQuality::of(&g, &a.host_of, &[1; 4]).imbalance, 1.0);
    }

    #[test]
    fn all_to_all_traffic_is_cut_no_more_than_round_robin_cuts_it() {
        // A source feeding four tasks round robin, each feeding all four of a second stage:
        // the Throughput Test's shape. Two equal hosts.
        let mut g = TaskGraph::new(vec![1.0; 9]);
        for a in 1..5 {
            g.add_traffic(0, a, 0.25);
            for b in 5..9 {
                g.add_traffic(a, b, 1.0 / 16.0);
            }
        }
        let slots = [2, 2];
        let placed = TaskAssignment::new(&g, &slots, 8, DEFAULT_BALANCE_TOLERANCE);
        let round_robin: Vec<usize> = (0..9).map(|t| t % 2).collect();
        let ours = PlacementQuality::of(&g, &placed.host_of, &slots);
        let theirs = PlacementQuality::of(&g, &round_robin, &slots);
        assert!(
            ours.cross_host_traffic <= theirs.cross_host_traffic,
            "{ours:?} {theirs:?}"
        );
        assert!(ours.imbalance <= theirs.imbalance, "{ours:?} {theirs:?}");
    }

    #[test]
    fn one_host_takes_everything() {
        let a = TaskAssignment::new(&two_pairs(), &[3], 2, DEFAULT_BALANCE_TOLERANCE);
        assert_eq!(a.host_of, vec![0; 4]);
    }

    proptest::proptest! {
        /// Every task gets a host that exists, and the figures stay in their ranges.
        #[test]
        fn every_task_is_placed_on_a_host_that_exists(
            n in 1usize..40,
            edges in proptest::collection::vec((0usize..40, 0usize..40, 1u32..100), 0..80),
            slots in proptest::collection::vec(1usize..4, 1..6),
        ) {
            let mut g = TaskGraph::new(vec![1.0; n]);
            for (a, b, w) in edges {
                g.add_traffic(a % n, b % n, f64::from(w));
            }
            let a = TaskAssignment::new(&g, &slots, 8, DEFAULT_BALANCE_TOLERANCE);
            proptest::prop_assert_eq!(a.host_of.len(), n);
            proptest::prop_assert!(a.host_of.iter().all(|&h| h < slots.len()));
            let q = PlacementQuality::of(&g, &a.host_of, &slots);
            proptest::prop_assert!((0.0..=1.0).contains(&q.cross_host_traffic));
            proptest::prop_assert!(q.imbalance >= 1.0 - 1e-9);
        }
    }
}
