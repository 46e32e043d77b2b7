//! Building and validating a graph.
//!
//! ```
//! use sluice_graph::{GraphBuilder, Operator, Output, OperatorError, Partitioning, Ports,
//!                    Produced, Source};
//! use sluice_types::TupleRef;
//!
//! struct Count(u64);
//! impl Source for Count {
//!     fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
//!         if self.0 == 0 { return Ok(Produced::Exhausted); }
//!         self.0 -= 1;
//!         out.emit(0, self.0)?;
//!         Ok(Produced::Emitted(1))
//!     }
//! }
//! struct Drop;
//! impl Operator for Drop {
//!     fn process(&mut self, _: usize, _: TupleRef<'_>, _: &mut Output<'_>)
//!         -> Result<(), OperatorError> { Ok(()) }
//! }
//!
//! let mut g = GraphBuilder::new("demo");
//! let src = g.source("numbers", Ports::new().output::<u64>(), |_| Count(10));
//! let sink = g.operator("sink", Ports::new().input::<u64>(), |_| Drop);
//! g.set_parallelism(sink, 2).unwrap();
//! g.connect_with(src.out(0), sink.input(0), Partitioning::key_by(|n: &u64| *n)).unwrap();
//! let graph = g.build().unwrap();
//! assert_eq!(graph.operators().len(), 2);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sluice_transport::StreamType;
use sluice_types::Tuple;

use crate::operator::{Operator, OperatorContext, Source};
use crate::returned::ResultInlet;
use crate::{GraphError, Partitioning, Placement, UnreplayableSources};

/// Index of an operator in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperatorId(pub usize);

/// Index of an edge in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeId(pub usize);

/// The typed ports of an operator, declared with a builder.
#[derive(Debug, Clone, Default)]
pub struct Ports {
    inputs: Vec<StreamType>,
    outputs: Vec<StreamType>,
}

impl Ports {
    /// No ports yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input port carrying `T`.
    pub fn input<T: Tuple>(mut self) -> Self {
        self.inputs.push(StreamType::of::<T>());
        self
    }

    /// Adds an output port carrying `T`.
    pub fn output<T: Tuple>(mut self) -> Self {
        self.outputs.push(StreamType::of::<T>());
        self
    }
}

type SourceFactory = Arc<dyn Fn(&OperatorContext) -> Box<dyn Source> + Send + Sync>;
type OperatorFactory = Arc<dyn Fn(&OperatorContext) -> Box<dyn Operator> + Send + Sync>;

/// Whether a node produces tuples from nothing or transforms its inputs, and how to make one.
#[derive(Clone)]
pub enum OperatorKind {
    /// A source: no input ports.
    Source(SourceFactory),
    /// An operator with input ports.
    Operator(OperatorFactory),
}

/// One operator of the graph.
#[derive(Clone)]
pub struct OperatorDef {
    /// Its index.
    pub id: OperatorId,
    /// Its unique name.
    pub name: String,
    /// Its input ports.
    pub inputs: Vec<StreamType>,
    /// Its output ports.
    pub outputs: Vec<StreamType>,
    /// How many parallel instances it runs as.
    pub parallelism: usize,
    /// Where its instances may run.
    pub placement: Vec<Placement>,
    /// How its input is spread when an optimizer gives it more instances: round robin for a
    /// stateless operator, key-by for one whose state is per key (flow affinity); `None`
    /// when it keeps other state and so cannot be replicated.
    pub replication: Option<Partitioning>,
    /// What it declared it costs ([`GraphBuilder::declare_cost`]); `None` when it declared
    /// nothing, and a planner assumes a cost of its own.
    pub cost: Option<DeclaredCost>,
    /// What it is, with its factory.
    pub kind: OperatorKind,
}

/// What an operator declares one tuple costs it, for a planner that chooses threads before
/// any run has measured them (`--plan auto`): the CPU it spends and how many tuples it passes
/// on. Figures from a profile of the operator on the machine the job is planned for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeclaredCost {
    /// CPU nanoseconds a tuple it takes in costs it (a source: a tuple it emits).
    pub ns_per_tuple: f64,
    /// Tuples it emits on each output port per tuple it takes in (a source: 1; a filter
    /// keeping half: 0.5; a split of sentences into ten words: 10).
    pub outputs_per_input: f64,
}

impl OperatorDef {
    /// Whether it is a source.
    pub fn is_source(&self) -> bool {
        matches!(self.kind, OperatorKind::Source(_))
    }
}

/// A handle to an operator being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorHandle(OperatorId);

impl From<OperatorId> for OperatorHandle {
    fn from(id: OperatorId) -> Self {
        Self(id)
    }
}

impl OperatorHandle {
    /// The operator's id.
    pub fn id(self) -> OperatorId {
        self.0
    }

    /// Output port `port`.
    pub fn out(self, port: usize) -> OutPort {
        OutPort {
            operator: self.0,
            port,
        }
    }

    /// Input port `port`.
    pub fn input(self, port: usize) -> InPort {
        InPort {
            operator: self.0,
            port,
        }
    }
}

/// An output port of an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OutPort {
    /// The operator.
    pub operator: OperatorId,
    /// The port index.
    pub port: usize,
}

/// An input port of an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InPort {
    /// The operator.
    pub operator: OperatorId,
    /// The port index.
    pub port: usize,
}

/// One stream: an output port connected to an input port.
#[derive(Debug, Clone)]
pub struct EdgeDef {
    /// Its index.
    pub id: EdgeId,
    /// Where tuples come from.
    pub from: OutPort,
    /// Where they go.
    pub to: InPort,
    /// How they are spread over the downstream instances.
    pub partitioning: Partitioning,
}

/// A validated logical graph.
#[derive(Clone)]
pub struct Graph {
    name: String,
    operators: Vec<OperatorDef>,
    edges: Vec<EdgeDef>,
    topological: Vec<OperatorId>,
    /// Where the results of sinks that return them to the launching process go, by sink name.
    returns: BTreeMap<String, Arc<dyn ResultInlet>>,
}

impl Graph {
    /// Where the results its sinks return from PE processes go, by sink name
    /// ([`GraphBuilder::returns_results`]).
    pub fn result_inlets(&self) -> &BTreeMap<String, Arc<dyn ResultInlet>> {
        &self.returns
    }

    /// The same graph with operator `name` running as `parallelism` instances, its forward
    /// inputs spread as it declared with [`GraphBuilder::replicable`] (other partitionings
    /// already spread over any number of instances, and stay).
    pub fn replicated(&self, name: &str, parallelism: usize) -> Result<Graph, GraphError> {
        let def = self.find(name).ok_or_else(|| GraphError::NoSuchOperator {
            name: name.to_string(),
            known: self
                .operators
                .iter()
                .map(|o| o.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let spread = def
            .replication
            .clone()
            .ok_or_else(|| GraphError::NotReplicable(name.to_string()))?;
        if parallelism == 0 {
            return Err(GraphError::ZeroParallelism(name.to_string()));
        }
        let id = def.id;
        let mut graph = self.clone();
        graph.operators[id.0].parallelism = parallelism;
        for edge in graph.edges.iter_mut().filter(|e| e.to.operator == id) {
            if matches!(edge.partitioning, Partitioning::Forward) {
                edge.partitioning = spread.clone();
            }
        }
        check_forward_edges(&graph)?;
        Ok(graph)
    }

    /// The application's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All operators, indexed by [`OperatorId`].
    pub fn operators(&self) -> &[OperatorDef] {
        &self.operators
    }

    /// The operator with this id.
    pub fn operator(&self, id: OperatorId) -> &OperatorDef {
        &self.operators[id.0]
    }

    /// The operator with this name.
    pub fn find(&self, name: &str) -> Option<&OperatorDef> {
        self.operators.iter().find(|o| o.name == name)
    }

    /// All edges, indexed by [`EdgeId`].
    pub fn edges(&self) -> &[EdgeDef] {
        &self.edges
    }

    /// The names of the sources that cannot resume where they stopped
    /// ([`Source::resumable`]): a job that takes checkpoints cannot replay their input after a
    /// failure. Makes an instance of each source to ask it (a source opens its input in
    /// `start`, not when it is made).
    pub fn unresumable_sources(&self) -> Vec<&str> {
        self.operators
            .iter()
            .filter(|op| match &op.kind {
                OperatorKind::Source(make) => {
                    let ctx = OperatorContext {
                        name: op.name.clone(),
                        instance: 0,
                        parallelism: op.parallelism,
                    };
                    !make(&ctx).resumable()
                }
                OperatorKind::Operator(_) => false,
            })
            .map(|op| op.name.as_str())
            .collect()
    }

    /// Refuses checkpoints for job `job` when some of its sources cannot replay their input
    /// ([`Graph::unresumable_sources`]), naming them.
    pub fn check_replayable(&self, job: &str) -> Result<(), UnreplayableSources> {
        let sources = self.unresumable_sources();
        if sources.is_empty() {
            return Ok(());
        }
        Err(UnreplayableSources {
            job: job.to_string(),
            sources: sources.into_iter().map(str::to_string).collect(),
        })
    }

    /// Operators in an order where every edge goes forward.
    pub fn topological_order(&self) -> &[OperatorId] {
        &self.topological
    }

    /// A label for an output port, such as `split.out[0]`.
    pub fn out_label(&self, port: OutPort) -> String {
        format!(
            "{}.out[{}]",
            self.operators[port.operator.0].name, port.port
        )
    }

    /// A label for an input port, such as `sum.in[0]`.
    pub fn in_label(&self, port: InPort) -> String {
        format!("{}.in[{}]", self.operators[port.operator.0].name, port.port)
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let operators: Vec<&str> = self.operators.iter().map(|o| o.name.as_str()).collect();
        let edges: Vec<String> = self
            .edges
            .iter()
            .map(|e| format!("{} -> {}", self.out_label(e.from), self.in_label(e.to)))
            .collect();
        f.debug_struct("Graph")
            .field("name", &self.name)
            .field("operators", &operators)
            .field("edges", &edges)
            .finish()
    }
}

/// Builds a [`Graph`]; problems are reported by the method that meets them or by
/// [`GraphBuilder::build`].
pub struct GraphBuilder {
    graph: Graph,
    names: BTreeSet<String>,
    first_error: Option<GraphError>,
}

impl GraphBuilder {
    /// A builder for the application `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            graph: Graph {
                name: name.into(),
                operators: Vec::new(),
                edges: Vec::new(),
                topological: Vec::new(),
                returns: BTreeMap::new(),
            },
            names: BTreeSet::new(),
            first_error: None,
        }
    }

    fn add(&mut self, name: &str, ports: Ports, kind: OperatorKind) -> OperatorHandle {
        let id = OperatorId(self.graph.operators.len());
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            self.first_error
                .get_or_insert(GraphError::InvalidName(name.to_string()));
        } else if !self.names.insert(name.to_string()) {
            self.first_error
                .get_or_insert(GraphError::DuplicateName(name.to_string()));
        }
        self.graph.operators.push(OperatorDef {
            id,
            name: name.to_string(),
            inputs: ports.inputs,
            outputs: ports.outputs,
            parallelism: 1,
            placement: Vec::new(),
            replication: None,
            cost: None,
            kind,
        });
        OperatorHandle(id)
    }

    /// Adds a source with the given output ports; `factory` makes each instance.
    /// Input ports declared in `ports` are ignored: a source has none.
    pub fn source<S, F>(&mut self, name: &str, ports: Ports, factory: F) -> OperatorHandle
    where
        S: Source + 'static,
        F: Fn(&OperatorContext) -> S + Send + Sync + 'static,
    {
        let ports = Ports {
            inputs: Vec::new(),
            outputs: ports.outputs,
        };
        let factory: SourceFactory = Arc::new(move |ctx| Box::new(factory(ctx)));
        self.add(name, ports, OperatorKind::Source(factory))
    }

    /// Adds an operator with the given ports; `factory` makes each instance.
    pub fn operator<O, F>(&mut self, name: &str, ports: Ports, factory: F) -> OperatorHandle
    where
        O: Operator + 'static,
        F: Fn(&OperatorContext) -> O + Send + Sync + 'static,
    {
        let factory: OperatorFactory = Arc::new(move |ctx| Box::new(factory(ctx)));
        self.add(name, ports, OperatorKind::Operator(factory))
    }

    fn def(&self, id: OperatorId) -> Result<&OperatorDef, GraphError> {
        self.graph
            .operators
            .get(id.0)
            .ok_or(GraphError::UnknownOperator(id.0))
    }

    /// Declares that the sink `sink` returns results to the launching process: what its
    /// instances send from PE processes goes to `inlet` (see [`crate::ResultOutlet`]).
    pub fn returns_results(
        &mut self,
        sink: OperatorHandle,
        inlet: Arc<dyn ResultInlet>,
    ) -> Result<(), GraphError> {
        let name = self.def(sink.0)?.name.clone();
        self.graph.returns.insert(name, inlet);
        Ok(())
    }

    /// Runs `operator` as `parallelism` instances.
    pub fn set_parallelism(
        &mut self,
        operator: OperatorHandle,
        parallelism: usize,
    ) -> Result<(), GraphError> {
        let def = self.def(operator.0)?;
        if parallelism == 0 {
            return Err(GraphError::ZeroParallelism(def.name.clone()));
        }
        self.graph.operators[operator.0 .0].parallelism = parallelism;
        Ok(())
    }

    /// Constrains where the instances of `operator` run; the planner honours every constraint
    /// or refuses the plan naming the one it cannot meet.
    pub fn place(
        &mut self,
        operator: OperatorHandle,
        placement: Placement,
    ) -> Result<(), GraphError> {
        self.def(operator.0)?;
        self.graph.operators[operator.0 .0]
            .placement
            .push(placement);
        Ok(())
    }

    /// Declares what a tuple costs `operator` (see [`DeclaredCost`]); a figure that is
    /// negative or not finite is refused.
    pub fn declare_cost(
        &mut self,
        operator: OperatorHandle,
        cost: DeclaredCost,
    ) -> Result<(), GraphError> {
        let def = self.def(operator.0)?;
        for (what, value) in [
            ("ns_per_tuple", cost.ns_per_tuple),
            ("outputs_per_input", cost.outputs_per_input),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(GraphError::InvalidParameter {
                    operator: def.name.clone(),
                    reason: format!(
                        "its declared cost's {what} is {value}, not a finite figure of 0 or more"
                    ),
                });
            }
        }
        self.graph.operators[operator.0 .0].cost = Some(cost);
        Ok(())
    }

    /// Declares that `operator` may run as any number of instances, its input spread by
    /// `input`: `RoundRobin` when any instance can take any tuple, `KeyBy` when tuples of one
    /// key must meet one instance (the key reads the operator's first input port's type).
    pub fn replicable(
        &mut self,
        operator: OperatorHandle,
        input: Partitioning,
    ) -> Result<(), GraphError> {
        let def = self.def(operator.0)?;
        match &input {
            Partitioning::RoundRobin => {}
            Partitioning::KeyBy(key) => {
                let stream = def.inputs.first().map(StreamType::schema);
                if stream != Some(key.schema()) {
                    return Err(GraphError::InvalidParameter {
                        operator: def.name.clone(),
                        reason: format!(
                            "its replication key reads {}, not its input",
                            key.schema().type_name
                        ),
                    });
                }
            }
            other => {
                return Err(GraphError::InvalidParameter {
                    operator: def.name.clone(),
                    reason: format!(
                        "a replica's input is spread round-robin or key-by, not {}",
                        other.name()
                    ),
                })
            }
        }
        self.graph.operators[operator.0 .0].replication = Some(input);
        Ok(())
    }

    /// Records that `operator`'s parameters cannot work; [`GraphBuilder::build`] refuses the
    /// graph with the first such reason, naming the operator.
    pub fn refuse(&mut self, operator: OperatorHandle, reason: impl Into<String>) {
        let operator = self
            .graph
            .operators
            .get(operator.0 .0)
            .map_or_else(|| format!("#{}", operator.0 .0), |o| o.name.clone());
        self.first_error
            .get_or_insert(GraphError::InvalidParameter {
                operator,
                reason: reason.into(),
            });
    }

    /// The parallelism `operator` runs with so far.
    pub fn parallelism(&self, operator: OperatorHandle) -> Result<usize, GraphError> {
        Ok(self.def(operator.0)?.parallelism)
    }

    /// Changes how `edge` spreads its tuples.
    pub fn set_partitioning(
        &mut self,
        edge: EdgeId,
        partitioning: Partitioning,
    ) -> Result<(), GraphError> {
        let e = self
            .graph
            .edges
            .get(edge.0)
            .ok_or(GraphError::UnknownEdge(edge.0))?;
        if let Partitioning::KeyBy(key) = &partitioning {
            let stream = self.def(e.from.operator)?.outputs[e.from.port].schema();
            if key.schema() != stream {
                return Err(GraphError::KeyTypeMismatch {
                    from: self.graph.out_label(e.from),
                    to: self.graph.in_label(e.to),
                    key_type: key.schema().type_name,
                    stream_type: stream.type_name,
                });
            }
        }
        self.graph.edges[edge.0].partitioning = partitioning;
        Ok(())
    }

    /// The edges built so far.
    pub fn edges(&self) -> &[EdgeDef] {
        &self.graph.edges
    }

    /// Connects `from` to `to`, forward-partitioned.
    pub fn connect(&mut self, from: OutPort, to: InPort) -> Result<EdgeId, GraphError> {
        self.connect_with(from, to, Partitioning::Forward)
    }

    /// Connects `from` to `to` with a partitioning.
    pub fn connect_with(
        &mut self,
        from: OutPort,
        to: InPort,
        partitioning: Partitioning,
    ) -> Result<EdgeId, GraphError> {
        let up = self.def(from.operator)?;
        let down = self.def(to.operator)?;
        let out_type = up.outputs.get(from.port).ok_or(GraphError::NoSuchPort {
            operator: up.name.clone(),
            direction: "output",
            port: from.port,
            count: up.outputs.len(),
        })?;
        let in_type = down.inputs.get(to.port).ok_or(GraphError::NoSuchPort {
            operator: down.name.clone(),
            direction: "input",
            port: to.port,
            count: down.inputs.len(),
        })?;
        let (from_label, to_label) = (self.graph.out_label(from), self.graph.in_label(to));
        if out_type.schema() != in_type.schema() {
            return Err(GraphError::SchemaMismatch {
                from: from_label,
                from_type: out_type.schema().type_name,
                to: to_label,
                to_type: in_type.schema().type_name,
            });
        }
        if let Partitioning::KeyBy(key) = &partitioning {
            if key.schema() != out_type.schema() {
                return Err(GraphError::KeyTypeMismatch {
                    from: from_label,
                    to: to_label,
                    key_type: key.schema().type_name,
                    stream_type: out_type.schema().type_name,
                });
            }
        }
        if self
            .graph
            .edges
            .iter()
            .any(|e| e.from == from && e.to == to)
        {
            return Err(GraphError::DuplicateEdge {
                from: from_label,
                to: to_label,
            });
        }
        let id = EdgeId(self.graph.edges.len());
        self.graph.edges.push(EdgeDef {
            id,
            from,
            to,
            partitioning,
        });
        Ok(id)
    }

    /// Validates and returns the graph.
    pub fn build(mut self) -> Result<Graph, GraphError> {
        if let Some(error) = self.first_error {
            return Err(error);
        }
        let graph = &mut self.graph;
        if !graph.operators.iter().any(OperatorDef::is_source) {
            return Err(GraphError::NoSource);
        }
        for op in &graph.operators {
            if !op.is_source() && op.inputs.is_empty() {
                return Err(GraphError::NoInputs(op.name.clone()));
            }
            for port in 0..op.inputs.len() {
                let fed = graph
                    .edges
                    .iter()
                    .any(|e| e.to.operator == op.id && e.to.port == port);
                if !fed {
                    return Err(GraphError::UnconnectedInput {
                        operator: op.name.clone(),
                        port,
                    });
                }
            }
        }
        for op in &graph.operators {
            for p in &op.placement {
                if let Some(other) = p.other_operator() {
                    if !graph.operators.iter().any(|o| o.name == other) || other == op.name {
                        return Err(GraphError::BadPlacement {
                            operator: op.name.clone(),
                            placement: p.to_string(),
                        });
                    }
                }
            }
        }
        check_forward_edges(graph)?;
        graph.topological = topological_order(graph)?;
        Ok(self.graph)
    }
}

/// Refuses a forward edge to more instances than it comes from.
fn check_forward_edges(graph: &Graph) -> Result<(), GraphError> {
    for e in &graph.edges {
        let (up, down) = (
            graph.operators[e.from.operator.0].parallelism,
            graph.operators[e.to.operator.0].parallelism,
        );
        if matches!(e.partitioning, Partitioning::Forward) && down > up {
            return Err(GraphError::ForwardWidens {
                from: graph.out_label(e.from),
                to: graph.in_label(e.to),
                up,
                down,
            });
        }
    }
    Ok(())
}

/// Kahn's algorithm; on a cycle, reports one cycle's operators in order.
fn topological_order(graph: &Graph) -> Result<Vec<OperatorId>, GraphError> {
    let n = graph.operators.len();
    let mut indegree = vec![0usize; n];
    for e in &graph.edges {
        indegree[e.to.operator.0] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).rev().collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(OperatorId(i));
        for e in graph.edges.iter().filter(|e| e.from.operator.0 == i) {
            let j = e.to.operator.0;
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push(j);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every operator left has an upstream that is also left: walk upstream until a repeat.
    let mut at = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
    let mut path = Vec::new();
    while !path.contains(&at) {
        path.push(at);
        at = graph
            .edges
            .iter()
            .find(|e| e.to.operator.0 == at && indegree[e.from.operator.0] > 0)
            .map_or(at, |e| e.from.operator.0);
    }
    let start = path.iter().position(|&i| i == at).unwrap_or(0);
    let mut cycle: Vec<String> = path[start..]
        .iter()
        .rev()
        .map(|&i| graph.operators[i].name.clone())
        .collect();
    cycle.push(graph.operators[at].name.clone());
    Err(GraphError::Cycle(cycle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OperatorError, Output, Produced};
    use sluice_types::TupleRef;

    struct Nothing;
    impl Source for Nothing {
        fn produce(&mut self, _: &mut Output<'_>) -> Result<Produced, OperatorError> {
            Ok(Produced::Exhausted)
        }
    }
    struct Pass;
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

    fn pass(g: &mut GraphBuilder, name: &str) -> OperatorHandle {
        g.operator(name, Ports::new().input::<u64>().output::<u64>(), |_| Pass)
    }

    fn numbers(g: &mut GraphBuilder) -> OperatorHandle {
        g.source("src", Ports::new().output::<u64>(), |_| Nothing)
    }

    #[test]
    fn a_replicable_operator_takes_more_instances_and_spreads_its_forward_input() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let a = pass(&mut g, "a");
        let b = pass(&mut g, "b");
        g.connect(s.out(0), a.input(0)).unwrap();
        g.connect(a.out(0), b.input(0)).unwrap();
        g.replicable(a, Partitioning::key_by(|n: &u64| *n % 7))
            .unwrap();
        // A key over another type, or a partitioning that does not spread, is refused.
        let e = g
            .replicable(b, Partitioning::key_by(|s: &String| s.len()))
            .unwrap_err();
        assert!(e.to_string().contains("its replication key reads"), "{e}");
        let e = g.replicable(b, Partitioning::Broadcast).unwrap_err();
        assert!(e.to_string().contains("not broadcast"), "{e}");
        let graph = g.build().unwrap();
        let wide = graph.replicated("a", 4).unwrap();
        assert_eq!(wide.find("a").unwrap().parallelism, 4);
        assert_eq!(wide.edges()[0].partitioning.name(), "key-by");
        // Downstream of four instances, a forward edge to one instance stays valid.
        assert_eq!(wide.edges()[1].partitioning.name(), "forward");
        // The original is untouched.
        assert_eq!(graph.find("a").unwrap().parallelism, 1);
        let e = graph.replicated("b", 2).unwrap_err();
        assert!(
            matches!(e, GraphError::NotReplicable(ref n) if n == "b"),
            "{e}"
        );
        let e = graph.replicated("zz", 2).unwrap_err();
        assert!(e.to_string().contains("operators: src, a, b"), "{e}");
        assert!(matches!(
            graph.replicated("a", 0),
            Err(GraphError::ZeroParallelism(_))
        ));
    }

    #[test]
    fn a_declared_cost_is_kept_and_a_figure_below_zero_or_not_finite_refused() {
        let mut g = GraphBuilder::new("costs");
        let src = numbers(&mut g);
        let cost = DeclaredCost {
            ns_per_tuple: 25.0,
            outputs_per_input: 1.0,
        };
        g.declare_cost(src, cost).unwrap();
        for (bad, named) in [
            (
                DeclaredCost {
                    ns_per_tuple: -1.0,
                    ..cost
                },
                "ns_per_tuple is -1",
            ),
            (
                DeclaredCost {
                    outputs_per_input: f64::NAN,
                    ..cost
                },
                "outputs_per_input is NaN",
            ),
        ] {
            let error = g.declare_cost(src, bad).unwrap_err().to_string();
            assert!(error.contains("src") && error.contains(named), "{error}");
        }
        let graph = g.build().unwrap();
        assert_eq!(graph.operators()[0].cost, Some(cost));
    }

    #[test]
    fn unconnected_input_is_refused() {
        let mut g = GraphBuilder::new("t");
        numbers(&mut g);
        pass(&mut g, "lonely");
        let err = g.build().unwrap_err();
        assert_eq!(
            err.to_string(),
            "input port 0 of operator 'lonely' is not connected"
        );
    }

    #[test]
    fn cycle_is_refused_and_named() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let a = g.operator(
            "a",
            Ports::new().input::<u64>().input::<u64>().output::<u64>(),
            |_| Pass,
        );
        let b = pass(&mut g, "b");
        g.connect(s.out(0), a.input(0)).unwrap();
        g.connect(a.out(0), b.input(0)).unwrap();
        g.connect(b.out(0), a.input(1)).unwrap();
        let err = g.build().unwrap_err();
        assert!(
            matches!(&err, GraphError::Cycle(names) if names.contains(&"a".to_string()) && names.contains(&"b".to_string())),
            "{err}"
        );
        assert!(err.to_string().contains("cycle"), "{err}");
    }

    #[test]
    fn schema_mismatch_is_refused_naming_both_types() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let t = g.operator("text", Ports::new().input::<String>(), |_| Pass);
        let err = g.connect(s.out(0), t.input(0)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("src.out[0] (u64)"), "{msg}");
        assert!(msg.contains("text.in[0] (alloc::string::String)"), "{msg}");
    }

    #[test]
    fn key_function_must_read_the_stream_type() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let p = pass(&mut g, "p");
        let err = g
            .connect_with(
                s.out(0),
                p.input(0),
                Partitioning::key_by(|s: &String| s.len()),
            )
            .unwrap_err();
        assert!(matches!(err, GraphError::KeyTypeMismatch { .. }));
    }

    #[test]
    fn ports_names_and_parallelism_are_checked() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let p = pass(&mut g, "p");
        assert!(matches!(
            g.connect(s.out(1), p.input(0)),
            Err(GraphError::NoSuchPort {
                direction: "output",
                ..
            })
        ));
        assert!(matches!(
            g.set_parallelism(p, 0),
            Err(GraphError::ZeroParallelism(_))
        ));
        assert!(matches!(g.set_parallelism(s, 2), Ok(())));
        g.connect(s.out(0), p.input(0)).unwrap();
        assert!(matches!(
            g.connect(s.out(0), p.input(0)),
            Err(GraphError::DuplicateEdge { .. })
        ));
        pass(&mut g, "p");
        assert_eq!(
            g.build().unwrap_err(),
            GraphError::DuplicateName("p".into())
        );
    }

    #[test]
    fn a_forward_edge_may_not_widen() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let p = pass(&mut g, "p");
        g.set_parallelism(p, 2).unwrap();
        g.connect(s.out(0), p.input(0)).unwrap();
        let err = g.build().unwrap_err();
        assert!(
            matches!(err, GraphError::ForwardWidens { up: 1, down: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_graph_without_sources_is_refused() {
        let g = GraphBuilder::new("t");
        assert_eq!(g.build().unwrap_err(), GraphError::NoSource);
    }

    #[test]
    fn valid_graph_has_a_topological_order() {
        let mut g = GraphBuilder::new("t");
        let s = numbers(&mut g);
        let b = pass(&mut g, "b");
        let a = pass(&mut g, "a");
        g.connect(s.out(0), a.input(0)).unwrap();
        g.connect(a.out(0), b.input(0)).unwrap();
        let graph = g.build().unwrap();
        let order: Vec<&str> = graph
            .topological_order()
            .iter()
            .map(|id| graph.operator(*id).name.as_str())
            .collect();
        assert_eq!(order, vec!["src", "a", "b"]);
    }
}
