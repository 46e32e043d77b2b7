//! The generator source in a running job: its count, its own end, and its pace, which never
//! puts more than a small batch ahead.

mod common;

use std::sync::{Arc, Mutex};

use sluice_graph::{expect_tuple, Operator, OperatorError, Output};
use sluice_ops::{Generator, PACED_BATCH};
use sluice_plan::PlanRequest;
use sluice_types::{BatchRef, TupleRef};

use common::{collect, run_under, source_into};

#[test]
fn a_counted_generator_emits_its_sequence_under_every_plan() {
    for request in [PlanRequest::Fused, PlanRequest::Threaded] {
        let (tuples, report): (Vec<u64>, _) =
            collect(|| Generator::new(|i| Some(i * 3)).count(10_000), &request).unwrap();
        assert_eq!(tuples, (0..10_000).map(|i| i * 3).collect::<Vec<u64>>());
        assert_eq!(report.tuples_out("source"), 10_000, "{request:?}");
    }
}

#[test]
fn the_closure_ends_the_stream_with_none() {
    let (tuples, _): (Vec<String>, _) = collect(
        || Generator::new(|i| (i < 5).then(|| format!("tuple {i}"))),
        &PlanRequest::Fused,
    )
    .unwrap();
    assert_eq!(
        tuples,
        ["tuple 0", "tuple 1", "tuple 2", "tuple 3", "tuple 4"]
    );
}

/// Records the size of every batch it receives.
struct BatchSizes(Arc<Mutex<Vec<usize>>>);

impl Operator for BatchSizes {
    fn process(
        &mut self,
        port: usize,
        t: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        expect_tuple::<u64>(port, t)?;
        self.0.lock().unwrap().push(1);
        Ok(())
    }

    fn process_batch(
        &mut self,
        _: usize,
        batch: BatchRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.0.lock().unwrap().push(batch.len());
        Ok(())
    }
}

#[test]
fn a_paced_generator_emits_small_batches() {
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let into = sizes.clone();
    let graph = source_into::<u64, _, _>(
        || Generator::new(Some).rate(1_000_000).count(5_000),
        move || BatchSizes(into.clone()),
    );
    run_under(&graph, &PlanRequest::Fused).unwrap();
    let sizes = sizes.lock().unwrap();
    assert_eq!(sizes.iter().sum::<usize>(), 5_000);
    assert!(sizes.iter().all(|&n| n <= PACED_BATCH), "{sizes:?}");
}

#[test]
fn a_parallel_source_runs_an_instance_each_under_every_plan() {
    use sluice_graph::{GraphBuilder, Ports};
    use sluice_ops::Collect;

    for request in common::every_plan() {
        let into: sluice_ops::Collected<u64> = Default::default();
        let sink_into = into.clone();
        let mut g = GraphBuilder::new("parallel-source");
        let source = g.source("source", Ports::new().output::<u64>(), |ctx| {
            let instance = ctx.instance as u64;
            Generator::new(move |i| Some(instance * 1_000_000 + i)).count(1_000)
        });
        g.set_parallelism(source, 3).unwrap();
        let sink = g.operator("sink", Ports::new().input::<u64>(), move |_| {
            Collect::new(sink_into.clone())
        });
        g.connect(source.out(0), sink.input(0)).unwrap();
        let report = common::run_in_process(&g.build().unwrap(), &request).unwrap();
        let mut tuples = common::drain(&into);
        tuples.sort_unstable();
        let expected: Vec<u64> = (0..3u64)
            .flat_map(|s| (0..1_000).map(move |i| s * 1_000_000 + i))
            .collect();
        assert_eq!(tuples, expected, "{request:?}");
        assert_eq!(report.tuples_out("source"), 3_000, "{request:?}");
    }
}
