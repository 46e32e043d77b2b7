//! Showing a plan to a person: plain text and Graphviz DOT.

use std::fmt::{self, Write};

use crate::PhysicalPlan;

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
            }
        }
        writeln!(f, "edges:")?;
        for e in &self.edges {
            writeln!(
                f,
                "  {}.out[{}] -> {}.in[{}]  {}  via {}",
                self.instance(e.from.instance).name,
                e.from.port,
                self.instance(e.to.instance).name,
                e.to.port,
                e.partitioning,
                e.transport
            )?;
        }
        Ok(())
    }
}

impl PhysicalPlan {
    /// The plan in Graphviz DOT: a cluster per PE and per thread, an edge per physical edge
    /// labelled with its partitioning and transport.
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
                dot.push_str("    }\n");
            }
            dot.push_str("  }\n");
        }
        for e in &self.edges {
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
