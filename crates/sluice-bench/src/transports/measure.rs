//! A transport benchmark from its settings to its result: Sluice's runs alternating with its
//! baseline's (in process here, across processes in module `processes`), summarised into a
//! [`BenchResult`] of medians and ratios.

use std::io::Write;

use crate::foundation::args::{Bench, Settings, Transport, TupleEncoding};
use crate::foundation::load::{Load, Pacer};
use crate::foundation::machine;
use crate::foundation::payload::{self, Payload, PayloadVisitor};
use crate::foundation::record::{Counting, Measured, Recorder, RunFigures, Timing};
use crate::foundation::report::{render_json, render_table, BaselineResult, BenchResult};
use crate::foundation::stats::{self, median, LatencySummary};
use crate::transports::{baseline, engine, mpi, processes};
use sluice_graph::OperatorReport;

/// Runs `sluice bench throughput` or `latency` with `settings` and prints the result: a table,
/// or one line of JSON with `--json`.
pub(crate) fn main(settings: &Settings) -> anyhow::Result<()> {
    if settings.transport == Transport::Mpi && mpi::in_rank() {
        return mpi::rank(settings);
    }
    let result = measure(settings)?;
    let mut out = std::io::stdout().lock();
    if settings.json {
        writeln!(out, "{}", render_json(&result))?;
    } else {
        write!(out, "{}", render_table(&result))?;
    }
    Ok(())
}

/// Measures the benchmark `settings` describe: Sluice and its baseline, `repeat` times each.
pub(crate) fn measure(settings: &Settings) -> anyhow::Result<BenchResult> {
    let facade = settings.encoding == TupleEncoding::Facade;
    let measured = payload::dispatch(facade, settings.size, Measure(settings))??;
    Ok(summarise(settings, measured))
}

/// Runs a benchmark with the payload type the settings select.
struct Measure<'a>(&'a Settings);

impl PayloadVisitor for Measure<'_> {
    type Output = anyhow::Result<Measured>;

    fn visit<P: Payload>(self, size: usize) -> Self::Output {
        match self.0.bench {
            Bench::Throughput => repeat::<P, Counting>(self.0, P::template(size), Load::Flood),
            Bench::Latency { rate } => {
                repeat::<P, Timing>(self.0, P::template(size), Load::Paced(Pacer::new(rate)))
            }
        }
    }
}

/// Alternates Sluice and baseline runs `repeat` times.
fn repeat<P: Payload, R: Recorder>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<Measured> {
    let threaded = s.transport == Transport::Threaded;
    if s.transport.crosses_processes() {
        return processes::repeat::<P>(s, template, load);
    }
    let mut measured = Measured::new(s.repeat, false);
    for i in 1..=s.repeat {
        let engine = engine::run_engine::<P, R>(
            threaded,
            s.receivers,
            template.clone(),
            load.clone(),
            s.warmup,
            s.duration,
            s.idle,
        )
        .map_err(|e| anyhow::anyhow!("sluice run {i}: {e:#}"))?;
        measured.pinned = engine.pinned;
        measured.sluice.push(
            summed(&engine.sinks, s.size).map_err(|e| anyhow::anyhow!("sluice run {i}: {e:#}"))?,
        );

        let reports = if threaded {
            let run = baseline::channel::<P, R>(
                s.receivers,
                template.clone(),
                load.clone(),
                s.warmup,
                s.duration,
                s.idle,
            )?;
            measured.baseline_pinned = run.pinned;
            run.receivers
        } else {
            vec![baseline::direct_call::<P, R>(
                template.clone(),
                load.clone(),
                s.warmup,
                s.duration,
                s.idle,
            )]
        };
        measured.baseline_run(i, summed(&reports, s.size));
    }
    Ok(measured)
}

/// The figures of the receivers' reports, summed over them.
fn summed(reports: &[OperatorReport], size: usize) -> anyhow::Result<RunFigures> {
    let figures = reports
        .iter()
        .map(|r| RunFigures::from_report(r, size))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RunFigures::sum(&figures, size))
}

/// The median share of tuples lost over the runs that could lose any.
fn median_loss(runs: &[RunFigures]) -> Option<f64> {
    let fractions: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.loss.map(|l| l.fraction()))
        .collect();
    (!fractions.is_empty()).then(|| median(&fractions))
}

/// The median of each round-trip figure over the runs that measured one.
pub(crate) fn median_round_trip(runs: &[RunFigures]) -> Option<LatencySummary> {
    let trips: Vec<LatencySummary> = runs.iter().filter_map(|r| r.round_trip_ns).collect();
    LatencySummary::median_of(&trips)
}

pub(crate) fn medians(runs: &[RunFigures]) -> (f64, f64, Option<LatencySummary>) {
    let of = |f: fn(&RunFigures) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let latencies: Vec<LatencySummary> = runs.iter().filter_map(|r| r.latency_ns).collect();
    (
        of(|r| r.tuples_per_sec),
        of(|r| r.gbit_per_sec),
        LatencySummary::median_of(&latencies),
    )
}

fn summarise(s: &Settings, m: Measured) -> BenchResult {
    let (tps, gbit, one_way) = medians(&m.sluice);
    let (base_tps, base_gbit, base_latency) = medians(&m.baseline);
    let latency = matches!(s.bench, Bench::Latency { .. });
    let reflected = latency && s.method.reflects();
    let (name, description) = match s.transport {
        Transport::Fused => (
            "direct-call",
            "one thread, a plain loop passing each tuple by reference to an #[inline(never)] sink"
                .to_string(),
        ),
        Transport::ShmVega | Transport::ShmOsr => (
            "hardware",
            "one-way cache-line transfer between cores 0 and 1 (latency); one core's memcpy of the tuple size, offset off the source's page position (throughput)".to_string(),
        ),
        Transport::Tcp | Transport::TcpBatched | Transport::TcpAdaptive if reflected => (
            "raw-tcp",
            "one TCP_NODELAY connection on loopback from core 0 to a reflector process on core 1 and back: one write() per tuple, the reflector writing back whatever it reads, the sender cutting what comes back into tuples; one way = half the round trip".to_string(),
        ),
        Transport::UdpMq if reflected => (
            "raw-udp",
            "a connected UDP socket on loopback from core 0 to a reflector process on core 1 and back: one send() per tuple, the reflector sending each datagram back; one way = half the round trip of the datagrams that came back".to_string(),
        ),
        Transport::Tcp | Transport::TcpBatched | Transport::TcpAdaptive | Transport::Mpi => (
            "raw-tcp",
            "two processes on cores 0 and 1 over loopback: one blocking write() per tuple on a TCP_NODELAY socket, a reader cutting non-blocking reads into tuples of the fixed size".to_string(),
        ),
        Transport::UdpMq => (
            "raw-udp",
            "two processes on cores 0 and 1 over loopback: one send() per tuple on a connected UDP socket, a reader taking one datagram per non-blocking recv(), 4 MiB socket buffers; loss counted from the writer's total".to_string(),
        ),
        Transport::Threaded => (
            "crossbeam-channel",
            format!(
                "crossbeam_channel::bounded({}) from one thread to {} receiving thread(s){}, same sender and receiver code",
                baseline::CHANNEL_CAPACITY,
                s.receivers,
                if m.baseline_pinned { ", pinned to cores 0, 1, ..." } else { " (not pinned: fewer cores than threads)" }
            ),
        ),
    };
    let latency_ratio = |f: fn(&LatencySummary) -> f64| match (one_way, base_latency) {
        (Some(ours), Some(theirs)) => stats::ratio(f(&ours), f(&theirs)),
        _ => None,
    };
    // `ours` over the median of a yardstick the baseline runs measured beside their own.
    let yardstick_ratio = |ours: Option<f64>, figure: fn(&RunFigures) -> Option<f64>| {
        let runs: Vec<f64> = m.baseline.iter().filter_map(figure).collect();
        ours.filter(|_| !runs.is_empty())
            .and_then(|ours| stats::ratio(ours, stats::median(&runs)))
    };
    let handoff_ratio = yardstick_ratio(one_way.map(|l| l.p50), |run| run.handoff_ns);
    let ring_memcpy_ratio = yardstick_ratio(Some(gbit), |run| run.ring_memcpy_gbit);
    let (target_rate, ratio_to_baseline) = match s.bench {
        Bench::Throughput => (None, stats::ratio(tps, base_tps)),
        Bench::Latency { rate } => (Some(rate), None),
    };
    let mut result = BenchResult {
        bench: match s.bench {
            Bench::Throughput => "throughput",
            Bench::Latency { .. } => "latency",
        },
        transport: s.transport,
        encoding: s.encoding,
        tuple_size: s.size,
        producers: s.producers,
        receivers: s.receivers,
        per_receiver_tuples_per_sec: (s.receivers > 1).then(|| tps / s.receivers as f64),
        ring_bytes: matches!(s.transport, Transport::ShmOsr | Transport::ShmVega)
            .then_some(s.ring_bytes),
        target_rate,
        tuples_per_sec: tps,
        gbit_per_sec: gbit,
        latency_method: latency.then_some(s.method),
        latency_ns: one_way,
        round_trip_ns: median_round_trip(&m.sluice),
        loss: median_loss(&m.sluice),
        duration_s: s.duration.as_secs_f64(),
        warmup_s: s.warmup.as_secs_f64(),
        pinned: m.pinned,
        idle: s
            .idle
            .map_or_else(|| "default".to_string(), |i| i.name().to_string()),
        runs: m.sluice,
        baseline: BaselineResult {
            name,
            description,
            skipped: m.baseline.is_empty(),
            reason: m.baseline_failure,
            tuples_per_sec: (!m.baseline.is_empty()).then_some(base_tps),
            gbit_per_sec: (!m.baseline.is_empty()).then_some(base_gbit),
            latency_ns: base_latency,
            round_trip_ns: median_round_trip(&m.baseline),
            loss: median_loss(&m.baseline),
            runs: m.baseline,
        },
        ratio_to_baseline,
        p50_ratio_to_baseline: latency_ratio(|l| l.p50),
        p99_ratio_to_baseline: latency_ratio(|l| l.p99),
        ratio_to_ring_memcpy: ring_memcpy_ratio,
        p50_ratio_to_handoff: handoff_ratio,
        warnings: Vec::new(),
        commit: machine::commit(),
        cpu: machine::cpu(),
        cores: machine::cores(),
    };
    result.warnings = result.doubts();
    result
}
