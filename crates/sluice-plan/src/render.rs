//! Showing a plan to a person: plain text and Graphviz DOT, with the sender and receiver
//! operators the planner inserted where edges cross PEs.

use std::fmt::{self, Write};

use crate::{ChannelPlan, PhysicalPlan, ThreadPlan};

/// An operator the planner inserted into a thread for a channel between PEs.
enum Inserted<'a> {
    /// The sender fused into the thread of upstream instance `from`.
    Sender {
        channel: &'a ChannelPlan,
        from: usize,
    },
    /// The receiver polled by the thread of the channel's downstream instance.
    Receiver { channel: &'a ChannelPlan },
}

impl PhysicalPlan {
    /// The operators inserted into `thread`, senders first.
    fn inserted(&self, thread: &ThreadPlan) -> Vec<Inserted<'_>> {
        let cut = || self.channels.iter().filter(|c| self.crosses_pes(c));
        let senders = cut().flat_map(|c| {
            c.senders
                .iter()
                .filter(|s| self.instance(**s).thread == thread.id)
                .map(move |s| Inserted::Sender {
                    channel: c,
                    from: s.0,
                })
        });
        let receivers = cut()
            .filter(|c| self.instance(c.to.instance).thread == thread.id)
            .map(|c| Inserted::Receiver { channel: c });
        senders.chain(receivers).collect()
    }

    fn inserted_label(&self, op: &Inserted<'_>) -> String {
        match op {
            Inserted::Sender { channel, .. } => format!(
                "send {} ({}) to {}",
                channel.name(),
                channel.transport.name(),
                self.instance(channel.to.instance).name
            ),
            Inserted::Receiver { channel } => format!(
                "receive {} ({}) from {}",
                channel.name(),
                channel.transport.name(),
                channel
                    .senders
                    .iter()
                    .map(|s| self.instance(*s).name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl fmt::Display for PhysicalPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let threads = self.threads().count();
        writeln!(
            f,
            "plan for {} ({}): {} PE(s), {} thread(s), {} instance(s), {} edge(s)",
            self.job,
            self.strategy,
            self.pes.len(),
            threads,
            self.instances.len(),
            self.edges.len()
        )?;
        for pe in &self.pes {
            writeln!(f, "PE {} '{}' on {}", pe.id, pe.name, pe.host)?;
            for t in &pe.threads {
                let core = t
                    .core
                    .map_or("unpinned".to_string(), |c| format!("core {c}"));
                let members: Vec<&str> = t
                    .instances
                    .iter()
                    .map(|i| self.instance(*i).name.as_str())
                    .collect();
                writeln!(
                    f,
                    "  thread {} '{}' ({core}): {}",
                    t.id,
                    t.name,
                    members.join(", ")
                )?;
                for op in self.inserted(t) {
                    writeln!(f, "    + {}", self.inserted_label(&op))?;
                }
            }
        }
        writeln!(f, "edges:")?;
        for e in &self.edges {
            writeln!(
                f,
                "  {}.out[{}] -> {}.in[{}]  {}  via {}{}",
                self.instance(e.from.instance).name,
                e.from.port,
                self.instance(e.to.instance).name,
                e.to.port,
                e.partitioning,
                e.transport,
                e.channel.map_or(String::new(), |c| format!(" [c{c}]"))
            )?;
        }
        Ok(())
    }
}

impl PhysicalPlan {
    /// The plan in Graphviz DOT: a cluster per PE and per thread, an edge per physical edge
    /// labelled with its partitioning and transport; an edge between PEs runs through the
    /// inserted sender and receiver operators.
    pub fn to_dot(&self) -> String {
        let mut dot = format!("digraph \"{}\" {{\n  rankdir=LR;\n", self.job);
        for pe in &self.pes {
            let _ = writeln!(
                dot,
                "  subgraph \"cluster_pe{}\" {{\n    label=\"PE {} ({})\";",
                pe.id, pe.name, pe.host
            );
            for t in &pe.threads {
                let core = t.core.map_or(String::new(), |c| format!(", core {c}"));
                let _ = writeln!(
                    dot,
                    "    subgraph \"cluster_t{}\" {{\n      label=\"thread {}{core}\";",
                    t.id, t.name
                );
                for i in &t.instances {
                    let _ = writeln!(
                        dot,
                        "      i{} [shape=box, label=\"{}\"];",
                        i.0,
                        self.instance(*i).name
                    );
                }
                for op in self.inserted(t) {
                    let id = match op {
                        Inserted::Sender { channel, from } => format!("s{}_{from}", channel.id),
                        Inserted::Receiver { channel } => format!("r{}", channel.id),
                    };
                    let _ = writeln!(
                        dot,
                        "      {id} [shape=cds, style=filled, fillcolor=lightgrey, label=\"{}\"];",
                        self.inserted_label(&op)
                    );
                }
                dot.push_str("    }\n");
            }
            dot.push_str("  }\n");
        }
        let mut received = std::collections::BTreeSet::new();
        for e in &self.edges {
            if let Some(c) = e.channel.filter(|&c| self.crosses_pes(&self.channels[c])) {
                let _ = writeln!(
                    dot,
                    "  i{from} -> s{c}_{from} [label=\"{}\"];\n  s{c}_{from} -> r{c} [style=dashed, label=\"{}\"];",
                    e.partitioning,
                    e.transport.name(),
                    from = e.from.instance.0,
                );
                if received.insert(c) {
                    let _ = writeln!(dot, "  r{c} -> i{};", e.to.instance.0);
                }
                continue;
            }
            let _ = writeln!(
                dot,
                "  i{} -> i{} [label=\"{} / {}\"];",
                e.from.instance.0,
                e.to.instance.0,
                e.partitioning,
                e.transport.name()
            );
        }
        dot.push_str("}\n");
        dot
    }
}
