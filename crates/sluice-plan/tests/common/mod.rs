//! The graph the planner's tests plan: WordCount-shaped, source -> split -> sum (xN,
//! key-by) -> sink, with operators that do nothing.

use sluice_graph::{
    Graph, GraphBuilder, Operator, OperatorError, Output, Partitioning, Ports, Produced, Source,
};
use sluice_types::TupleRef;

pub struct Nothing;
impl Source for Nothing {
    fn produce(&mut self, _: &mut Output<'_>) -> Result<Produced, OperatorError> {
        Ok(Produced::Exhausted)
    }
}
pub struct Pass;
impl Operator for Pass {
    fn process(
        &mut self,
        _: usize,
        _: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        Ok(())
    }
}

pub fn graph() -> Graph {
    graph_with_sum(2)
}

pub fn graph_with_sum(parallelism: usize) -> Graph {
    let mut g = GraphBuilder::new("wc");
    let src = g.source("source", Ports::new().output::<String>(), |_| Nothing);
    let split = g.operator(
        "split",
        Ports::new().input::<String>().output::<String>(),
        |_| Pass,
    );
    let sum = g.operator(
        "sum",
        Ports::new().input::<String>().output::<u64>(),
        |_| Pass,
    );
    let sink = g.operator("sink", Ports::new().input::<u64>(), |_| Pass);
    g.set_parallelism(sum, parallelism).unwrap();
    g.connect(src.out(0), split.input(0)).unwrap();
    g.connect_with(
        split.out(0),
        sum.input(0),
        Partitioning::key_by(|w: &String| w.clone()),
    )
    .unwrap();
    g.connect(sum.out(0), sink.input(0)).unwrap();
    g.build().unwrap()
}
