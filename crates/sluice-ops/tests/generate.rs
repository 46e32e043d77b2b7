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
