//! Placing PEs on hosts under the operators' placement constraints.
//!
//! PEs whose operators must share a host (`ColocateWith`) are merged into units; each unit may
//! use the hosts that meet every `Host` and `Group` constraint of its operators; units whose
//! operators must never share a host (`ExlocateFrom`) get different hosts. The most constrained
//! unit is placed first, each on the least loaded host it may use (threads per core), with
//! backtracking when an exlocation leaves a unit nowhere to go. A PE a plan file puts on a
//! host (a placement optimizer's output) may use that host alone. A constraint that cannot be
//! met is reported by name.

use std::collections::BTreeSet;

use sluice_graph::{Graph, Placement};

use crate::{HostSpec, InstancePlan, PePlan, PlanError};

/// Most placement attempts before giving up (the search is exponential in the worst case).
const MAX_STEPS: usize = 100_000;

/// The host (index into `hosts`) of every PE.
pub(crate) fn place(
    graph: &Graph,
    pes: &[PePlan],
    instances: &[InstancePlan],
    pe_of: &[usize],
    hosts: &[HostSpec],
    pinned_hosts: &[Option<usize>],
) -> Result<Vec<usize>, PlanError> {
    let constraints = |pe: usize| {
        instances
            .iter()
            .filter(move |i| pe_of[i.id.0] == pe)
            .flat_map(move |i| {
                let op = &graph.operators()[i.operator];
                op.placement.iter().map(move |p| (op.name.as_str(), p))
            })
    };
    let pes_running = |operator: &str| -> Vec<usize> {
        let mut found: Vec<usize> = instances
            .iter()
            .filter(|i| graph.operators()[i.operator].name == operator)
            .map(|i| pe_of[i.id.0])
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    };

    // Isolation: an isolated operator's instance is alone in its PE.
    for (pe, plan) in pes.iter().enumerate() {
        for (op, p) in constraints(pe) {
            if *p == Placement::Isolated {
                let members: Vec<&str> = instances
                    .iter()
                    .filter(|i| pe_of[i.id.0] == pe)
                    .map(|i| i.name.as_str())
                    .collect();
                if members.len() > 1 {
                    return Err(PlanError::Placement {
                        operator: op.to_string(),
                        constraint: p.to_string(),
                        reason: format!(
                            "its PE '{}' also runs {}; place it in a PE of its own",
                            plan.name,
                            members.join(", ")
                        ),
                    });
                }
            }
        }
    }

    // Units of PEs that must share a host (union-find by colocation).
    let mut unit: Vec<usize> = (0..pes.len()).collect();
    fn root(unit: &mut [usize], mut x: usize) -> usize {
        while unit[x] != x {
            unit[x] = unit[unit[x]];
            x = unit[x];
        }
        x
    }
    for pe in 0..pes.len() {
        for (_, p) in constraints(pe) {
            if let Placement::ColocateWith(other) = p {
                for there in pes_running(other) {
                    let (a, b) = (root(&mut unit, pe), root(&mut unit, there));
                    unit[a] = b;
                }
            }
        }
    }
    let roots: Vec<usize> = (0..pes.len()).map(|pe| root(&mut unit, pe)).collect();
    let mut units: Vec<usize> = roots.clone();
    units.sort_unstable();
    units.dedup();
    let unit_of = |pe: usize| units.binary_search(&roots[pe]).unwrap_or(0);

    // The hosts each unit may use, and the units it must not share one with.
    let mut allowed: Vec<Vec<usize>> = vec![(0..hosts.len()).collect(); units.len()];
    let mut apart: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); units.len()];
    let mut threads = vec![0usize; units.len()];
    for (pe, plan) in pes.iter().enumerate() {
        let u = unit_of(pe);
        threads[u] += plan.threads.len();
        if let Some(host) = pinned_hosts[pe] {
            allowed[u].retain(|&h| h == host);
            if allowed[u].is_empty() {
                return Err(PlanError::Placement {
                    operator: instances
                        .iter()
                        .find(|i| pe_of[i.id.0] == pe)
                        .map_or_else(|| plan.name.clone(), |i| i.name.clone()),
                    constraint: format!(
                        "on host {}, where the plan file puts its PE '{}'",
                        hosts[host].name, plan.name
                    ),
                    reason: "the plan file's host for its PE conflicts with the constraints of the PEs it must share a host with".into(),
                });
            }
        }
        for (op, p) in constraints(pe) {
            let fits = |h: &HostSpec| match p {
                Placement::Host(name) => h.name == *name,
                Placement::Group(group) => h.groups.contains(group),
                _ => true,
            };
            allowed[u].retain(|&h| fits(&hosts[h]));
            if allowed[u].is_empty() {
                return Err(PlanError::Placement {
                    operator: op.to_string(),
                    constraint: p.to_string(),
                    reason: no_host_reason(hosts),
                });
            }
            if let Placement::ExlocateFrom(other) = p {
                for there in pes_running(other) {
                    let v = unit_of(there);
                    if v == u {
                        return Err(PlanError::Placement {
                            operator: op.to_string(),
                            constraint: p.to_string(),
                            reason: format!(
                                "'{other}' must share its host (through co-location or a PE)"
                            ),
                        });
                    }
                    apart[u].insert(v);
                    apart[v].insert(u);
                }
            }
        }
    }

    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&u| (allowed[u].len(), usize::MAX - apart[u].len(), u));
    let mut search = Search {
        hosts,
        allowed: &allowed,
        apart: &apart,
        threads: &threads,
        host_of: vec![None; units.len()],
        load: vec![0; hosts.len()],
        steps: 0,
    };
    if !search.assign(&order) {
        // Only exlocations can leave a unit nowhere: name the first, in placement order.
        let (op, p) = order
            .iter()
            .flat_map(|&u| (0..pes.len()).filter(move |&pe| unit_of(pe) == u))
            .flat_map(|pe| constraints(pe).collect::<Vec<_>>())
            .find(|(_, p)| matches!(p, Placement::ExlocateFrom(_)))
            .map_or((String::new(), String::new()), |(o, p)| {
                (o.to_string(), p.to_string())
            });
        return Err(PlanError::Placement {
            operator: op,
            constraint: p,
            reason: format!(
                "the {} host(s) cannot keep every exlocated operator apart",
                hosts.len()
            ),
        });
    }
    Ok((0..pes.len())
        .map(|pe| search.host_of[unit_of(pe)].unwrap_or(0))
        .collect())
}

fn no_host_reason(hosts: &[HostSpec]) -> String {
    let names: Vec<String> = hosts
        .iter()
        .map(|h| {
            if h.groups.is_empty() {
                h.name.clone()
            } else {
                format!("{} (groups {})", h.name, h.groups.join(", "))
            }
        })
        .collect();
    format!(
        "no host meets it together with its other constraints (hosts: {})",
        names.join("; ")
    )
}

/// Depth-first assignment of units to hosts.
struct Search<'a> {
    hosts: &'a [HostSpec],
    allowed: &'a [Vec<usize>],
    apart: &'a [BTreeSet<usize>],
    threads: &'a [usize],
    host_of: Vec<Option<usize>>,
    load: Vec<usize>,
    steps: usize,
}

impl Search<'_> {
    fn assign(&mut self, order: &[usize]) -> bool {
        let Some((&u, rest)) = order.split_first() else {
            return true;
        };
        let mut candidates: Vec<usize> = self.allowed[u]
            .iter()
            .copied()
            .filter(|&h| self.apart[u].iter().all(|&v| self.host_of[v] != Some(h)))
            .collect();
        // Least loaded first: threads per core after placing this unit.
        candidates.sort_by_key(|&h| {
            (
                (self.load[h] + self.threads[u]) * 1000 / self.hosts[h].cores,
                h,
            )
        });
        for h in candidates {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return false;
            }
            self.host_of[u] = Some(h);
            self.load[h] += self.threads[u];
            if self.assign(rest) {
                return true;
            }
            self.load[h] -= self.threads[u];
            self.host_of[u] = None;
        }
        false
    }
}
