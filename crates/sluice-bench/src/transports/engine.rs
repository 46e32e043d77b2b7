//! The system under test: a two-operator Sluice graph, `source -> sink`, planned fused (one
//! thread, the hop is a direct call) or threaded (two threads joined by a threaded port, which
//! the planner pins to cores 0 and 1 when the machine has two cores or more), and run by the
//! real runtime for the warm-up plus the measured duration, timed from the first tuple, after
//! which the source ends its stream and the runtime drains.
//! The source emits each `produce` call's tuples as one batch (`Output::emit_batch`), so the
//! fused hop is one call per batch and the sink reads the batch as a slice.

use std::marker::PhantomData;
use std::time::Duration;

use sluice_graph::{
    expect_tuple, GraphBuilder, Operator, OperatorError, OperatorReport, Output, Partitioning,
    Ports, Produced, Source,
};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{run, RunOptions};
use sluice_sync::IdleStrategy;
use sluice_types::{monotonic_ns, BatchRef, TupleRef};

use crate::foundation::load::{Generator, Load, Span};
use crate::foundation::payload::Payload;
use crate::foundation::record::Recorder;

/// Emits tuples as its [`Load`] says, for its [`Span`] from its first call (so a slow start
/// of the threads on a busy machine does not eat into the run).
struct BenchSource<P> {
    generator: Generator<P>,
    /// The tuples of one `produce` call, emitted as one batch.
    batch: Vec<P>,
}

impl<P: Payload> Source for BenchSource<P> {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        if self.generator.done() {
            return Ok(Produced::Exhausted);
        }
        let batch = &mut self.batch;
        let n = self.generator.fill(|tuple| -> Result<(), OperatorError> {
            batch.push(tuple.clone());
            Ok(())
        })?;
        if n == 0 {
            return Ok(Produced::Idle);
        }
        out.emit_batch(0, &mut self.batch)?;
        Ok(Produced::Emitted(n))
    }
}

/// Records what arrives, measuring from the warm-up's end counted from the first arrival; its
/// report carries the figures.
struct BenchSink<P, R> {
    recorder: R,
    warmup_ns: u64,
    started: bool,
    _tuples: PhantomData<fn(&P)>,
}

impl<P: Payload, R: Recorder> BenchSink<P, R> {
    /// Starts the warm-up at the first arrival.
    #[inline]
    fn arrived(&mut self) {
        if !self.started {
            self.started = true;
            self.recorder = R::new(monotonic_ns().saturating_add(self.warmup_ns));
        }
    }
}

impl<P: Payload, R: Recorder> Operator for BenchSink<P, R> {
    #[inline]
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.arrived();
        self.recorder.record(expect_tuple::<P>(port, tuple)?);
        Ok(())
    }

    #[inline]
    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.arrived();
        // A fused upstream hands over a contiguous batch; a threaded port's runs are read
        // through the erased view.
        if let Some(tuples) = batch.as_slice::<P>() {
            tuples.iter().for_each(|t| self.recorder.record(t));
            return Ok(());
        }
        for tuple in batch.iter() {
            self.recorder.record(expect_tuple::<P>(port, tuple)?);
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(self.recorder.report())
    }
}

/// What one engine run returns.
pub(crate) struct EngineRun {
    /// Each sink instance's report.
    pub(crate) sinks: Vec<OperatorReport>,
    /// Whether the planner pinned the threads to cores.
    pub(crate) pinned: bool,
}

/// Runs `source -> sink` with tuples like `template` for `warmup + duration` from the first
/// tuple (longer if the window would hold too few tuples, see [`Span`]), fused or threaded; the sink measures from the end of the warm-up. With `receivers`
/// above 1 the sink runs as that many instances behind a broadcast edge (a fan-out).
pub(crate) fn run_engine<P: Payload, R: Recorder>(
    threaded: bool,
    receivers: usize,
    template: P,
    load: Load,
    warmup: Duration,
    duration: Duration,
    idle: Option<IdleStrategy>,
) -> anyhow::Result<EngineRun> {
    let mut g = GraphBuilder::new("bench");
    let span = Span { warmup, duration };
    let source = g.source("source", Ports::new().output::<P>(), move |_| BenchSource {
        generator: Generator::new(template.clone(), load.clone(), span),
        batch: Vec::with_capacity(crate::foundation::load::BATCH),
    });
    let warmup_ns = u64::try_from(warmup.as_nanos()).unwrap_or(u64::MAX);
    let sink = g.operator("sink", Ports::new().input::<P>(), move |_| BenchSink::<
        P,
        R,
    > {
        recorder: R::new(u64::MAX),
        warmup_ns,
        started: false,
        _tuples: PhantomData,
    });
    if receivers > 1 {
        g.set_parallelism(sink, receivers)?;
        g.connect_with(source.out(0), sink.input(0), Partitioning::Broadcast)?;
    } else {
        g.connect(source.out(0), sink.input(0))?;
    }
    let graph = g.build()?;
    let request = if threaded {
        PlanRequest::Threaded
    } else {
        PlanRequest::Fused
    };
    let plan = plan(&graph, &request, &PlanOptions::default())?;
    let pinned = plan.threads().any(|t| t.core.is_some());
    let options = RunOptions {
        idle,
        ..RunOptions::default()
    };
    let report = run(&graph, &plan, &options)?;
    Ok(EngineRun {
        sinks: report
            .instances
            .iter()
            .filter(|i| i.operator == "sink")
            .map(|i| i.report.clone())
            .collect(),
        pinned,
    })
}
