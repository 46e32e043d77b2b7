//! Graphviz export of the logical graph.

use std::fmt::Write;

use crate::Graph;

impl Graph {
    /// The graph in Graphviz DOT: one node per operator (with its parallelism), one edge per
    /// stream labelled with its tuple type and partitioning.
    pub fn to_dot(&self) -> String {
        let mut dot = format!("digraph \"{}\" {{\n  rankdir=LR;\n", self.name());
        for op in self.operators() {
            let shape = if op.is_source() { "invhouse" } else { "box" };
            let _ = writeln!(
                dot,
                "  \"{}\" [shape={shape}, label=\"{} x{}\"];",
                op.name, op.name, op.parallelism
            );
        }
        for e in self.edges() {
            let ty = self.operator(e.from.operator).outputs[e.from.port]
                .schema()
                .type_name;
            let _ = writeln!(
                dot,
                "  \"{}\" -> \"{}\" [label=\"{} {}\"];",
                self.operator(e.from.operator).name,
                self.operator(e.to.operator).name,
                ty,
                e.partitioning.name()
            );
        }
        dot.push_str("}\n");
        dot
    }
}
