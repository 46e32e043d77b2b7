//! What the suite measures: the papers' experiments as a list of jobs, at three levels of
//! thoroughness (a full run, `--quick`, `--smoke`).
//!
//! | experiment | the papers' | jobs |
//! |---|---|---|
//! | `hardware` | the yardstick | cache-line ping-pong, memcpy (`sluice bench baseline`) |
//! | `throughput` | IBM Tables 1 and 5, Vega Fig. 7b | sender -> receiver flood, every size, every transport |
//! | `latency` | Vega Fig. 7a and V.A.1 | at 1,000 and 5,000 tuples/s: one way from the shared clock in process and over shared memory, half the round trip through a reflector over tcp |
//! | `round-trip` | IBM's latency test | the round trip through a reflector at 1,000 and 5,000 tuples/s: shm-vega, shm-osr (tcp and tcp-batched come from `latency`, or are measured here without it) |
//! | `encoding` | IBM Table 3 | the throughput jobs again with normal tuples |
//! | `fanout` | IBM Table 6 | one sender to 1..6 receivers at 22, 108 and 1,004 bytes |
//! | `large` | TurboStream Fig. 8 | 10 KB..320 KB messages at 100..3,000/s, shm-osr and tcp, and the ring size |
//! | `apps` | TurboStream's WordCount | every benchable application under the fused, threaded and processes plans beside its hand-written yardsticks, as fast as possible and at 40,000 source tuples/s (latency) |
//! | `topology` | TurboStream Fig. 10 | SOL and the Throughput Test under the fused, threaded and processes plans at 1,000 to 80,000 tuples/s: latency against input rate (`sluice bench topology`) |
//! | `omdp` | Vega Fig. 8 | OMDP's per-hop latency against the feed rate (multiples of the February 2008 OPRA rate, over the shared-memory feed), fused against the two-processes and processes plans |
//! | `pipeline` | the TCD parallel runtime paper's Figure 4 | the compression and encryption pipelines over a fixed input with 1 and 2 senders and receivers, the speedup over the serial program (`sluice bench pipeline`) |
//! | `peers` | what a user would pick instead | ZeroMQ (ipc, tcp), iceoryx2; crossbeam comes with `threaded` |

use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;

use sluice_sync::IdleStrategy;

use super::app_job::AppJob;
use super::output;
use super::peers::{self, Peer, PeerJob};
use super::pipeline_job::PipelineJob;
use crate::foundation::args::{Bench, LatencyMethod, Settings, Transport, TupleEncoding};

/// One experiment of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// The hardware's limits: cache-line ping-pong and memcpy.
    Hardware,
    /// Sender -> receiver throughput for every tuple size and transport.
    Throughput,
    /// Latency percentiles at 1,000 and 5,000 tuples per second: one way (shared memory, in
    /// process), half the round trip through a reflector (network).
    Latency,
    /// The round trip through a reflector at 1,000 and 5,000 tuples per second (the IBM
    /// latency test).
    #[value(name = "round-trip")]
    #[serde(rename = "round-trip")]
    RoundTrip,
    /// Normal (serialized) tuples against facade tuples.
    Encoding,
    /// One sender to 1..6 receivers.
    Fanout,
    /// 10 KB to 320 KB messages over shm-osr and tcp, and the ring size they need.
    Large,
    /// The built-in applications under each plan beside their hand-written yardsticks, as
    /// fast as possible and at a rate.
    Apps,
    /// The Storm topologies' latency against their input rate under each plan.
    Topology,
    /// OMDP's per-hop latency against the feed rate under each plan (Vega Fig. 8).
    Omdp,
    /// The compression and encryption pipelines' speedup over a serial program at 1 and 2
    /// senders and receivers.
    Pipeline,
    /// The peer libraries: ZeroMQ and iceoryx2 (crossbeam comes with `threaded`).
    Peers,
}

impl Experiment {
    /// The name in results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hardware => "hardware",
            Self::Throughput => "throughput",
            Self::Latency => "latency",
            Self::RoundTrip => "round-trip",
            Self::Encoding => "encoding",
            Self::Fanout => "fanout",
            Self::Large => "large",
            Self::Apps => "apps",
            Self::Topology => "topology",
            Self::Omdp => "omdp",
            Self::Pipeline => "pipeline",
            Self::Peers => "peers",
        }
    }
}

/// How thorough a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// Every size, three repeats: under 35 minutes on two cores.
    Full,
    /// A handful of sizes, short runs, one repeat: about two minutes.
    Quick,
    /// One size per experiment, the shortest runs: seconds (for tests).
    Smoke,
}

/// Duration, warm-up and repeats of one kind of measurement.
type Timing = (Duration, Duration, usize);

fn timing(duration_s: f64, warmup_s: f64, repeat: usize) -> Timing {
    (
        Duration::from_secs_f64(duration_s),
        Duration::from_secs_f64(warmup_s),
        repeat,
    )
}

/// The transports of the throughput, latency and encoding experiments.
pub(crate) const TRANSPORTS: [Transport; 6] = [
    Transport::Fused,
    Transport::Threaded,
    Transport::ShmVega,
    Transport::ShmOsr,
    Transport::Tcp,
    Transport::TcpBatched,
];
/// The transports of the round-trip experiment (the IBM latency test; raw TCP is tcp's
/// baseline).
pub(crate) const ROUND_TRIP_TRANSPORTS: [Transport; 4] = [
    Transport::ShmVega,
    Transport::ShmOsr,
    Transport::Tcp,
    Transport::TcpBatched,
];
/// The transports with a fan-out benchmark: IBM's Table 6 compares plain TCP (`tcp`, against
/// raw TCP measured in the same run) with batching LLM-TCP (`tcp-batched`).
pub(crate) const FANOUT_TRANSPORTS: [Transport; 4] = [
    Transport::Threaded,
    Transport::ShmVega,
    Transport::Tcp,
    Transport::TcpBatched,
];
/// The transports of the large-message experiment (TurboStream's OSRBuffer against sockets).
pub(crate) const LARGE_TRANSPORTS: [Transport; 2] = [Transport::ShmOsr, Transport::Tcp];
/// The OSR ring of the large-message experiment: TurboStream's 2 MB.
pub(crate) const LARGE_RING_BYTES: usize = 2 << 20;
/// The message of the ring-size sweep (TurboStream Fig. 8c), at its 3,000 messages/s.
pub(crate) const RING_SWEEP_SIZE: usize = 40 << 10;
/// The transports of the round-trip experiment's ping-pong: the rings, whose latency target
/// is set against the cache-line ping-pong.
pub(crate) const PING_PONG_TRANSPORTS: [Transport; 2] = [Transport::ShmVega, Transport::ShmOsr];
/// The ping-pong's tuple size: the one of the rings' latency target.
pub(crate) const PING_PONG_SIZE: usize = 64;
/// The ping-pong's rate: far above what a round trip allows, so tuples go back to back.
pub(crate) const PING_PONG_RATE: u64 = 1_000_000_000;

/// The rate of the ring-size sweep.
pub(crate) const RING_SWEEP_RATE: u64 = 3_000;

/// The source rate (tuples per second) at which the applications' latency is measured.
pub(crate) const APP_RATE: u64 = 40_000;

/// The input rates of the topology experiment: TurboStream's Figure 10.
pub(crate) const TOPOLOGY_RATES: [u64; 6] = [1_000, 5_000, 10_000, 20_000, 40_000, 80_000];
/// The parallelisms of the pipeline experiment: as many senders as receivers, up to the cores.
pub(crate) const PIPELINE_PARALLELISM: &[&str] = &["1", "2"];

/// Everything a level measures.
struct Plan {
    hardware: (usize, u64, usize),
    throughput_sizes: Vec<usize>,
    throughput: Timing,
    latency_sizes: Vec<usize>,
    latency_rates: Vec<u64>,
    latency: Timing,
    encoding_sizes: Vec<usize>,
    fanout_sizes: Vec<usize>,
    fanout_receivers: Vec<usize>,
    fanout: Timing,
    large_sizes: Vec<usize>,
    large_rates: Vec<u64>,
    ring_sweep: Vec<usize>,
    large: Timing,
    app_plans: Vec<&'static str>,
    /// Whether each application also runs under the plans it ships (`sluice apps`).
    with_shipped_plans: bool,
    apps: Timing,
    topology_plans: Vec<&'static str>,
    topology_rates: Vec<u64>,
    topology: Timing,
    omdp_plans: Vec<&'static str>,
    omdp_multiples: Vec<f64>,
    /// Seconds each OMDP point runs.
    omdp_s: f64,
    /// The input of each pipeline, and the runs at each parallelism.
    pipelines: ([(&'static str, u64); 2], usize),
}

impl Level {
    /// The level's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Quick => "quick",
            Self::Smoke => "smoke",
        }
    }

    fn plan(self) -> Plan {
        let kb = |k: usize| k << 10;
        match self {
            Self::Full => Plan {
                hardware: (5, 200_000, 2 << 30),
                throughput_sizes: (2..=14).map(|p| 1usize << p).collect(),
                throughput: timing(0.5, 0.2, 3),
                latency_sizes: vec![8, 128, 512],
                latency_rates: vec![1_000, 5_000],
                latency: timing(0.8, 0.1, 3),
                encoding_sizes: vec![4, 16, 64, 256, 1024, 4096, 16384],
                fanout_sizes: vec![22, 108, 1004],
                fanout_receivers: (1..=6).collect(),
                fanout: timing(0.4, 0.1, 2),
                large_sizes: [10, 20, 40, 80, 160, 320].map(kb).to_vec(),
                large_rates: vec![100, 1_000, 3_000],
                ring_sweep: [128, 256, 512, 1024, 2048, 4096].map(kb).to_vec(),
                large: timing(1.0, 0.1, 2),
                app_plans: vec!["fused", "threaded", "processes"],
                with_shipped_plans: true,
                apps: timing(1.0, 0.2, 3),
                topology_plans: vec!["fused", "threaded", "processes"],
                topology_rates: TOPOLOGY_RATES.to_vec(),
                topology: timing(1.0, 0.2, 3),
                omdp_plans: vec!["fused", "two-processes", "processes"],
                omdp_multiples: OMDP_MULTIPLES.to_vec(),
                omdp_s: 4.0,
                pipelines: ([("compress", 64 << 20), ("encrypt", 512 << 20)], 3),
            },
            Self::Quick => Plan {
                hardware: (1, 50_000, 256 << 20),
                throughput_sizes: vec![4, 64, 1024, 16384],
                throughput: timing(0.2, 0.05, 1),
                latency_sizes: vec![64],
                latency_rates: vec![1_000, 5_000],
                latency: timing(0.3, 0.05, 1),
                encoding_sizes: vec![64, 16384],
                fanout_sizes: vec![108],
                fanout_receivers: vec![1, 2, 4],
                fanout: timing(0.2, 0.05, 1),
                large_sizes: [10, 320].map(kb).to_vec(),
                large_rates: vec![1_000],
                ring_sweep: [128, 2048].map(kb).to_vec(),
                large: timing(0.3, 0.05, 1),
                app_plans: vec!["fused", "threaded", "processes"],
                with_shipped_plans: true,
                apps: timing(0.3, 0.1, 1),
                topology_plans: vec!["fused", "threaded", "processes"],
                topology_rates: vec![40_000],
                topology: timing(0.3, 0.1, 1),
                omdp_plans: vec!["fused", "two-processes"],
                omdp_multiples: vec![5.0],
                omdp_s: 1.0,
                pipelines: ([("compress", 8 << 20), ("encrypt", 64 << 20)], 1),
            },
            Self::Smoke => Plan {
                hardware: (1, 5_000, 16 << 20),
                throughput_sizes: vec![64],
                throughput: timing(0.05, 0.0, 1),
                latency_sizes: vec![64],
                latency_rates: vec![5_000],
                latency: timing(0.1, 0.0, 1),
                encoding_sizes: vec![64],
                fanout_sizes: vec![108],
                fanout_receivers: vec![2],
                fanout: timing(0.05, 0.0, 1),
                large_sizes: vec![kb(10)],
                large_rates: vec![1_000],
                ring_sweep: vec![],
                large: timing(0.1, 0.0, 1),
                app_plans: vec!["fused"],
                with_shipped_plans: false,
                apps: timing(0.1, 0.0, 1),
                topology_plans: vec!["fused"],
                topology_rates: vec![1_000],
                topology: timing(0.1, 0.0, 1),
                // OMDP's runs take seconds each; `tests/omdp.rs` runs them.
                omdp_plans: vec![],
                omdp_multiples: vec![],
                omdp_s: 0.5,
                pipelines: ([("compress", 256 << 10), ("encrypt", 1 << 20)], 1),
            },
        }
    }
}

/// What one job measures.
#[derive(Debug, Clone)]
enum What {
    /// `sluice bench baseline`: repeats, ping-pong round trips, memcpy bytes.
    Hardware(usize, u64, usize),
    /// One `sluice bench throughput` or `latency`.
    Sluice(Settings),
    /// One peer library.
    Peer(PeerJob),
    /// One `sluice bench app`.
    App(AppJob),
    /// One `sluice run omdp --json` over the shared-memory feed: plan, rate multiple, seconds.
    Omdp(&'static str, f64, f64),
    /// One `sluice bench pipeline`.
    Pipeline(PipelineJob),
}

/// One measurement of the suite.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The experiment it belongs to.
    pub(crate) experiment: Experiment,
    what: What,
}

/// Seconds a cross-process run costs beyond its duration: starting the processes.
const PROCESS_START_S: f64 = 0.1;

impl Job {
    /// How long it should take.
    pub(crate) fn estimate(&self) -> Duration {
        let seconds = match &self.what {
            What::Hardware(repeat, trips, bytes) => {
                // About 100 ns a round trip and 10 GB/s of memcpy, plus a warm-up tenth.
                1.1 * (*repeat as f64) * (*trips as f64 * 1e-7 + 2.0 * *bytes as f64 / 1e10)
            }
            What::Sluice(s) => {
                let run = (s.warmup + s.duration).as_secs_f64();
                let start = if s.transport.crosses_processes() {
                    PROCESS_START_S * s.receivers as f64
                } else {
                    0.0
                };
                s.repeat as f64 * 2.0 * (run + start)
            }
            What::Peer(job) => job.estimate().as_secs_f64(),
            What::App(job) => job.estimate().as_secs_f64(),
            What::Omdp(_, _, seconds) => seconds + OMDP_START_S,
            What::Pipeline(job) => job.estimate().as_secs_f64(),
        };
        Duration::from_secs_f64(seconds)
    }

    /// A short description for the progress bar.
    pub(crate) fn label(&self) -> String {
        let experiment = self.experiment.name();
        match &self.what {
            What::Hardware(..) => format!("{experiment}: ping-pong and memcpy"),
            What::Sluice(s) => {
                let mut label = format!("{experiment}: {} {} B", s.transport.name(), s.size);
                if let Bench::Latency { rate } = s.bench {
                    label.push_str(&format!(" at {rate}/s"));
                    if s.method.reflects() {
                        label.push_str(&format!(" {}", s.method.name()));
                    }
                }
                if s.receivers > 1 {
                    label.push_str(&format!(" to {} receivers", s.receivers));
                }
                label
            }
            What::Peer(job) => format!("{experiment}: {}", job.label()),
            What::App(job) => format!("{experiment}: {}", job.label()),
            What::Omdp(plan, multiple, _) => format!("{experiment}: {plan} at {multiple}x"),
            What::Pipeline(job) => format!("{experiment}: {}", job.label()),
        }
    }

    /// Measures, and returns the records: one, or two when a measurement's baseline is also a
    /// peer (crossbeam, the baseline of `threaded`).
    pub(crate) fn run(&self) -> Vec<Value> {
        match &self.what {
            What::Hardware(repeat, trips, bytes) => {
                let result = crate::transports::hardware::measure(*repeat, *trips, *bytes);
                vec![output::to_value(&result)]
            }
            What::Sluice(s) => match crate::transports::measure::measure(s) {
                Ok(result) => {
                    let mut records = vec![output::to_value(&result)];
                    if matches!(
                        self.experiment,
                        Experiment::Throughput | Experiment::Latency
                    ) {
                        records.extend(peers::from_baseline(&result));
                    }
                    records
                }
                Err(e) => vec![output::skipped_sluice(s, &format!("{e:#}"))],
            },
            What::Peer(job) => vec![job.run()],
            What::App(job) => vec![job.run()],
            What::Omdp(plan, multiple, seconds) => vec![omdp_record(plan, *multiple, *seconds)],
            What::Pipeline(job) => job.run(),
        }
    }
}

/// The rate multiples of the full OMDP sweep (the issue's, around the paper's 60,000 to 600,000
/// packets/s).
pub(crate) const OMDP_MULTIPLES: [f64; 6] = [1.0, 5.0, 10.0, 25.0, 50.0, 100.0];
/// Seconds an OMDP run costs beyond its duration: the job's start, its feed sender's and the
/// drain.
const OMDP_START_S: f64 = 1.5;

/// One OMDP point's record, or a skipped record with the reason. The feed goes over shared
/// memory: the kernel's UDP path cannot carry the higher multiples on two cores.
fn omdp_record(plan: &str, multiple: f64, seconds: f64) -> Value {
    let settings = ["feed=shm".to_string()];
    match crate::apps::omdp::run_point(plan, multiple, seconds, &settings) {
        Ok(result) => crate::apps::omdp::record(&crate::apps::omdp::Point {
            plan: plan.to_string(),
            multiple,
            result,
        }),
        Err(e) => serde_json::json!({
            "experiment": "omdp",
            "bench": "omdp",
            "app": "omdp",
            "plan": plan,
            "rate_multiple": multiple,
            "skipped": true,
            "reason": format!("{e:#}"),
        }),
    }
}

fn sluice(experiment: Experiment, settings: Settings) -> Job {
    Job {
        experiment,
        what: What::Sluice(settings),
    }
}

/// The jobs of `level`, of the `only` experiments (every one when empty), in the order they
/// run: the hardware first, the peers last.
pub(crate) fn jobs(level: Level, only: &[Experiment]) -> Vec<Job> {
    let plan = level.plan();
    let wanted = |e: Experiment| only.is_empty() || only.contains(&e);
    let mut jobs = Vec::new();
    let facade = TupleEncoding::Facade;
    if wanted(Experiment::Hardware) {
        let (repeat, trips, bytes) = plan.hardware;
        jobs.push(Job {
            experiment: Experiment::Hardware,
            what: What::Hardware(repeat, trips, bytes),
        });
    }
    if wanted(Experiment::Throughput) {
        for &size in &plan.throughput_sizes {
            for transport in TRANSPORTS {
                let s = Settings::measurement(
                    Bench::Throughput,
                    transport,
                    facade,
                    size,
                    plan.throughput,
                );
                jobs.push(sluice(Experiment::Throughput, s));
            }
        }
    }
    if wanted(Experiment::Latency) {
        for &rate in &plan.latency_rates {
            for &size in &plan.latency_sizes {
                for transport in TRANSPORTS {
                    let bench = Bench::Latency { rate };
                    let s = Settings::measurement(bench, transport, facade, size, plan.latency);
                    jobs.push(sluice(Experiment::Latency, s));
                }
            }
        }
    }
    if wanted(Experiment::RoundTrip) {
        for &rate in &plan.latency_rates {
            for &size in &plan.latency_sizes {
                for transport in ROUND_TRIP_TRANSPORTS {
                    // The latency experiment measures the network's round trips already.
                    let reflected = LatencyMethod::default_for(transport);
                    if wanted(Experiment::Latency) && reflected == LatencyMethod::HalfRoundTrip {
                        continue;
                    }
                    let bench = Bench::Latency { rate };
                    let mut s = Settings::measurement(bench, transport, facade, size, plan.latency);
                    s.method = LatencyMethod::HalfRoundTrip;
                    jobs.push(sluice(Experiment::RoundTrip, s));
                }
            }
        }
        for transport in PING_PONG_TRANSPORTS {
            let bench = Bench::Latency {
                rate: PING_PONG_RATE,
            };
            let mut s =
                Settings::measurement(bench, transport, facade, PING_PONG_SIZE, plan.latency);
            s.method = LatencyMethod::PingPong;
            // Back to back, an idle loop's yield would be timed: both ends spin.
            s.idle = Some(IdleStrategy::BusySpin);
            jobs.push(sluice(Experiment::RoundTrip, s));
        }
    }
    if wanted(Experiment::Encoding) {
        for &size in &plan.encoding_sizes {
            for transport in TRANSPORTS {
                let s = Settings::measurement(
                    Bench::Throughput,
                    transport,
                    TupleEncoding::Normal,
                    size,
                    plan.throughput,
                );
                jobs.push(sluice(Experiment::Encoding, s));
            }
        }
    }
    if wanted(Experiment::Fanout) {
        for &size in &plan.fanout_sizes {
            for &receivers in &plan.fanout_receivers {
                for transport in FANOUT_TRANSPORTS {
                    let mut s = Settings::measurement(
                        Bench::Throughput,
                        transport,
                        facade,
                        size,
                        plan.fanout,
                    );
                    s.receivers = receivers;
                    jobs.push(sluice(Experiment::Fanout, s));
                }
            }
        }
    }
    if wanted(Experiment::Large) {
        let large = |transport, size, rate, ring| {
            let bench = Bench::Latency { rate };
            let normal = TupleEncoding::Normal;
            let mut s = Settings::measurement(bench, transport, normal, size, plan.large);
            // One way from the shared clock over both, as TurboStream's figure compares them.
            s.method = LatencyMethod::OneWayClock;
            if transport == Transport::ShmOsr {
                s.ring_bytes = ring;
            }
            sluice(Experiment::Large, s)
        };
        for &rate in &plan.large_rates {
            for &size in &plan.large_sizes {
                for transport in LARGE_TRANSPORTS {
                    jobs.push(large(transport, size, rate, LARGE_RING_BYTES));
                }
            }
        }
        // The sweep's message at its rate in the experiment's own ring is measured above
        // already when the experiment has that size and rate.
        let measured = plan.large_sizes.contains(&RING_SWEEP_SIZE)
            && plan.large_rates.contains(&RING_SWEEP_RATE);
        for &ring in plan
            .ring_sweep
            .iter()
            .filter(|&&r| !(measured && r == LARGE_RING_BYTES))
        {
            jobs.push(large(
                Transport::ShmOsr,
                RING_SWEEP_SIZE,
                RING_SWEEP_RATE,
                ring,
            ));
        }
    }
    if wanted(Experiment::Apps) {
        for bench in crate::apps::BENCHABLE {
            let shipped = match sluice_apps::find(bench.name) {
                Ok(spec) if plan.with_shipped_plans => spec.plans,
                _ => &[],
            };
            let app_plans = plan.app_plans.iter().copied();
            for app_plan in app_plans.chain(shipped.iter().map(|p| p.name)) {
                for rate in [None, Some(APP_RATE)] {
                    jobs.push(Job {
                        experiment: Experiment::Apps,
                        what: What::App(AppJob::new(bench, app_plan, rate, plan.apps)),
                    });
                }
            }
        }
    }
    if wanted(Experiment::Topology) {
        let topologies = crate::apps::BENCHABLE
            .iter()
            .filter(|b| b.input_rate.is_some());
        for bench in topologies {
            for &topology_plan in &plan.topology_plans {
                for &rate in &plan.topology_rates {
                    let job = AppJob::new(bench, topology_plan, Some(rate), plan.topology);
                    jobs.push(Job {
                        experiment: Experiment::Topology,
                        what: What::App(job.app_only(&[])),
                    });
                }
            }
        }
    }
    if wanted(Experiment::Omdp) {
        for &omdp_plan in &plan.omdp_plans {
            for &multiple in &plan.omdp_multiples {
                jobs.push(Job {
                    experiment: Experiment::Omdp,
                    what: What::Omdp(omdp_plan, multiple, plan.omdp_s),
                });
            }
        }
    }
    if wanted(Experiment::Pipeline) {
        let (inputs, repeat) = plan.pipelines;
        for (app, size) in inputs {
            jobs.push(Job {
                experiment: Experiment::Pipeline,
                what: What::Pipeline(PipelineJob::new(app, PIPELINE_PARALLELISM, size, repeat)),
            });
        }
    }
    if wanted(Experiment::Peers) {
        for peer in Peer::OUT_OF_PROCESS {
            for &size in &plan.throughput_sizes {
                let job = PeerJob::new(peer, Bench::Throughput, size, plan.throughput);
                jobs.push(Job {
                    experiment: Experiment::Peers,
                    what: What::Peer(job),
                });
            }
            for &rate in &plan.latency_rates {
                for &size in &plan.latency_sizes {
                    let job = PeerJob::new(peer, Bench::Latency { rate }, size, plan.latency);
                    jobs.push(Job {
                        experiment: Experiment::Peers,
                        what: What::Peer(job),
                    });
                }
            }
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_matrix_covers_the_papers_experiments() {
        let jobs = jobs(Level::Full, &[]);
        let count = |e| jobs.iter().filter(|j| j.experiment == e).count();
        assert_eq!(count(Experiment::Hardware), 1);
        assert_eq!(
            count(Experiment::Throughput),
            13 * 6,
            "4..16384 bytes, 6 transports"
        );
        assert_eq!(count(Experiment::Latency), 2 * 3 * 6);
        assert_eq!(
            count(Experiment::RoundTrip),
            2 * 3 * 2 + 2,
            "shm-vega and shm-osr, and their ping-pong; latency measures tcp's round trips"
        );
        let alone = super::jobs(Level::Full, &[Experiment::RoundTrip]);
        assert_eq!(
            alone.len(),
            2 * 3 * 4 + 2,
            "with tcp and tcp-batched when alone"
        );
        assert_eq!(count(Experiment::Fanout), 3 * 6 * 4, "IBM Table 6");
        assert_eq!(
            count(Experiment::Large),
            3 * 6 * 2 + 5,
            "the sweep reuses 2 MiB"
        );
        let shipped: usize = crate::apps::BENCHABLE
            .iter()
            .map(|b| sluice_apps::find(b.name).unwrap().plans.len())
            .sum();
        assert!(shipped > 0, "wordcount ships plans");
        assert_eq!(
            count(Experiment::Apps),
            (crate::apps::BENCHABLE.len() * 3 + shipped) * 2,
            "every benchable application, three plans and those it ships, flooded and paced"
        );
        assert_eq!(
            count(Experiment::Topology),
            2 * 3 * 6,
            "SOL and the Throughput Test, three plans, six rates"
        );
        assert_eq!(count(Experiment::Omdp), 3 * 6, "three plans, six multiples");
        assert_eq!(count(Experiment::Pipeline), 2, "compress and encrypt");
        let minutes = jobs
            .iter()
            .map(Job::estimate)
            .sum::<Duration>()
            .as_secs_f64()
            / 60.0;
        assert!(
            minutes < 35.0,
            "the full run is estimated at {minutes:.1} min"
        );
    }

    #[test]
    fn quick_and_smoke_are_short_and_only_selects() {
        for (level, most_s) in [(Level::Quick, 120.0), (Level::Smoke, 20.0)] {
            let seconds: f64 = jobs(level, &[])
                .iter()
                .map(|j| j.estimate().as_secs_f64())
                .sum();
            assert!(seconds < most_s, "{level:?}: {seconds:.1} s");
        }
        let only = jobs(Level::Quick, &[Experiment::Fanout]);
        assert!(only.iter().all(|j| j.experiment == Experiment::Fanout));
        assert!(!only.is_empty());
        assert!(only.iter().all(|j| !j.label().is_empty()));
    }
}
